from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RequestHeader(_message.Message):
    __slots__ = ("method", "seq")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    method: str
    seq: int
    def __init__(self, method: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class ResponseHeader(_message.Message):
    __slots__ = ("method", "seq", "error")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    method: str
    seq: int
    error: str
    def __init__(self, method: _Optional[str] = ..., seq: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class UploadBeginRequest(_message.Message):
    __slots__ = ("name", "size", "chunk_size")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    chunk_size: int
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., chunk_size: _Optional[int] = ...) -> None: ...

class UploadBeginResponse(_message.Message):
    __slots__ = ("upload_id",)
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    upload_id: int
    def __init__(self, upload_id: _Optional[int] = ...) -> None: ...

class UploadChunkRequest(_message.Message):
    __slots__ = ("upload_id", "offset", "data")
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    upload_id: int
    offset: int
    data: bytes
    def __init__(self, upload_id: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadChunkResponse(_message.Message):
    __slots__ = ("received",)
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    received: int
    def __init__(self, received: _Optional[int] = ...) -> None: ...

class UploadCommitRequest(_message.Message):
    __slots__ = ("upload_id", "crc32")
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    upload_id: int
    crc32: int
    def __init__(self, upload_id: _Optional[int] = ..., crc32: _Optional[int] = ...) -> None: ...

class UploadCommitResponse(_message.Message):
    __slots__ = ("size", "crc32")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    size: int
    crc32: int
    def __init__(self, size: _Optional[int] = ..., crc32: _Optional[int] = ...) -> None: ...

class UploadAbortRequest(_message.Message):
    __slots__ = ("upload_id",)
    UPLOAD_ID_FIELD_NUMBER: _ClassVar[int]
    upload_id: int
    def __init__(self, upload_id: _Optional[int] = ...) -> None: ...

class UploadAbortResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("name", "offset", "length")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    name: str
    offset: int
    length: int
    def __init__(self, name: _Optional[str] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("data", "size", "crc32")
    DATA_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    size: int
    crc32: int
    def __init__(self, data: _Optional[bytes] = ..., size: _Optional[int] = ..., crc32: _Optional[int] = ...) -> None: ...
