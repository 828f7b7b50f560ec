from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UploadHeader(_message.Message):
    __slots__ = ("name", "size", "chunk_size")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    chunk_size: int
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., chunk_size: _Optional[int] = ...) -> None: ...

class UploadTrailer(_message.Message):
    __slots__ = ("crc32",)
    CRC32_FIELD_NUMBER: _ClassVar[int]
    crc32: int
    def __init__(self, crc32: _Optional[int] = ...) -> None: ...

class UploadRequest(_message.Message):
    __slots__ = ("header", "chunk", "trailer")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    TRAILER_FIELD_NUMBER: _ClassVar[int]
    header: UploadHeader
    chunk: bytes
    trailer: UploadTrailer
    def __init__(self, header: _Optional[_Union[UploadHeader, _Mapping]] = ..., chunk: _Optional[bytes] = ..., trailer: _Optional[_Union[UploadTrailer, _Mapping]] = ...) -> None: ...

class UploadResponse(_message.Message):
    __slots__ = ("size", "crc32")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    size: int
    crc32: int
    def __init__(self, size: _Optional[int] = ..., crc32: _Optional[int] = ...) -> None: ...

class DownloadRequest(_message.Message):
    __slots__ = ("name", "chunk_size")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    name: str
    chunk_size: int
    def __init__(self, name: _Optional[str] = ..., chunk_size: _Optional[int] = ...) -> None: ...

class DownloadHeader(_message.Message):
    __slots__ = ("name", "size", "chunk_size")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_SIZE_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    chunk_size: int
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., chunk_size: _Optional[int] = ...) -> None: ...

class DownloadTrailer(_message.Message):
    __slots__ = ("crc32",)
    CRC32_FIELD_NUMBER: _ClassVar[int]
    crc32: int
    def __init__(self, crc32: _Optional[int] = ...) -> None: ...

class DownloadResponse(_message.Message):
    __slots__ = ("header", "chunk", "trailer")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    TRAILER_FIELD_NUMBER: _ClassVar[int]
    header: DownloadHeader
    chunk: bytes
    trailer: DownloadTrailer
    def __init__(self, header: _Optional[_Union[DownloadHeader, _Mapping]] = ..., chunk: _Optional[bytes] = ..., trailer: _Optional[_Union[DownloadTrailer, _Mapping]] = ...) -> None: ...

class EchoRequest(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    def __init__(self, payload: _Optional[bytes] = ...) -> None: ...

class EchoResponse(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    def __init__(self, payload: _Optional[bytes] = ...) -> None: ...

class StatRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class StatResponse(_message.Message):
    __slots__ = ("name", "size", "crc32")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    crc32: int
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., crc32: _Optional[int] = ...) -> None: ...

class MetaEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class MetaRequest(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[MetaEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[MetaEntry, _Mapping]]] = ...) -> None: ...

class MetaResponse(_message.Message):
    __slots__ = ("entries", "digest")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[MetaEntry]
    digest: int
    def __init__(self, entries: _Optional[_Iterable[_Union[MetaEntry, _Mapping]]] = ..., digest: _Optional[int] = ...) -> None: ...
