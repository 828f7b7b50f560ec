"""py_client's frame codec and content pass every vector in proto/testdata (PROTOCOL.md "Test vectors")."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf.message import DecodeError, Message

from py_client import XferError, meta
from py_client.content import crc32, gen_bytes, gen_crc32, parse_gen_name
from py_client.frame import (
    DEFAULT_MAX_FRAME,
    chunk_request_prefix,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_frame,
)
from xfer.v1 import file_transfer_pb2, frame_pb2

TESTDATA = Path(__file__).resolve().parents[2] / "proto" / "testdata"


def rows(name: str) -> list[list[str]]:
    out = []
    for line in (TESTDATA / name).read_text().splitlines():
        if line and not line.startswith("#"):
            out.append(line.split("\t"))
    assert out, f"{name} has no vectors"
    return out


def unhex(field: str) -> bytes:
    return b"" if field == "-" else bytes.fromhex(field)


def text(field: str) -> str:
    return "" if field == "-" else field


def ids(vectors: list[list[str]]) -> list[str]:
    return [f"{i}:{v[0]}:{v[1]}"[:60] for i, v in enumerate(vectors)]


FRAMES = rows("frames.vectors")
BODIES = rows("bodies.vectors")
GEN = rows("gen.vectors")


def test_every_frame_vector_kind_is_known() -> None:
    assert {v[0] for v in FRAMES} <= {"request", "response", "parse"}
    assert {v[0] for v in FRAMES} == {"request", "response", "parse"}


@pytest.mark.parametrize("vec", [v for v in FRAMES if v[0] == "request"],
                         ids=ids([v for v in FRAMES if v[0] == "request"]))
def test_request_frames(vec: list[str]) -> None:
    _, seq, method, body_hex, frame_hex = vec
    body, frame = unhex(body_hex), unhex(frame_hex)
    assert encode_request(int(seq), method, body) == frame
    assert parse_frame(frame, DEFAULT_MAX_FRAME).size == len(frame)
    hdr, got_body = decode_request(frame)
    assert (hdr.seq, hdr.method, bytes(got_body)) == (int(seq), method, body)


@pytest.mark.parametrize("vec", [v for v in FRAMES if v[0] == "response"],
                         ids=ids([v for v in FRAMES if v[0] == "response"]))
def test_response_frames(vec: list[str]) -> None:
    _, seq, method, error, body_hex, frame_hex = vec
    body, frame = unhex(body_hex), unhex(frame_hex)
    assert encode_response(int(seq), text(method), text(error), body) == frame
    hdr, got_body = decode_response(frame)
    assert (hdr.seq, hdr.method, hdr.error, bytes(got_body)) == (int(seq), text(method), text(error), body)


@pytest.mark.parametrize("vec", [v for v in FRAMES if v[0] == "parse"],
                         ids=ids([v for v in FRAMES if v[0] == "parse"]))
def test_parse_vectors(vec: list[str]) -> None:
    _, max_frame, outcome, data_hex = vec
    data = unhex(data_hex)
    result = parse_frame(data, int(max_frame))
    assert str(result) == outcome
    if result.outcome == "error":
        assert result.message, "a parse error explains itself"
    # Stateless: the same answer from bytes, bytearray and memoryview.
    assert str(parse_frame(bytearray(data), int(max_frame))) == outcome
    assert str(parse_frame(memoryview(data), int(max_frame))) == outcome


MESSAGE_TYPES: dict[str, type[Message]] = {
    name: getattr(mod, name)
    for mod in (frame_pb2, file_transfer_pb2)
    for name in mod.DESCRIPTOR.message_types_by_name
}


def build(type_name: str, fields: str) -> Message:
    msg = MESSAGE_TYPES[type_name]()
    if fields == "-":
        return msg
    for pair in fields.split(","):
        key, value = pair.split("=", 1)
        fd = msg.DESCRIPTOR.fields_by_name[key]
        if fd.type == fd.TYPE_BYTES:
            setattr(msg, key, bytes.fromhex(value))
        elif fd.type == fd.TYPE_STRING:
            setattr(msg, key, value)
        else:
            setattr(msg, key, int(value))
    return msg


@pytest.mark.parametrize("vec", BODIES, ids=[v[0] for v in BODIES])
def test_bodies(vec: list[str]) -> None:
    type_name, fields, body_hex = vec
    msg = build(type_name, fields)
    body = unhex(body_hex)
    assert msg.SerializeToString() == body
    assert msg.SerializeToString(deterministic=True) == body
    parsed = MESSAGE_TYPES[type_name]()
    parsed.ParseFromString(body)
    assert parsed == msg


@pytest.mark.parametrize("vec", [v for v in BODIES if v[0] == "UploadChunkRequest"], ids=["chunk"])
def test_hand_encoded_chunk_request(vec: list[str]) -> None:
    """The frame client sends chunk data from the caller's buffer behind a hand-made prefix."""
    msg = build(vec[0], vec[1])
    assert isinstance(msg, frame_pb2.UploadChunkRequest)
    assert chunk_request_prefix(msg.upload_id, msg.offset, len(msg.data)) + msg.data == unhex(vec[2])


@pytest.mark.parametrize(("uid", "off", "n"),
                         [(0, 0, 0), (1, 0, 5), (2**64 - 1, 2**40, 4 << 20), (300, 127, 128)])
def test_hand_encoded_chunk_request_matches_protobuf(uid: int, off: int, n: int) -> None:
    data = b"\x5a" * n
    want = frame_pb2.UploadChunkRequest(upload_id=uid, offset=off, data=data).SerializeToString()
    assert chunk_request_prefix(uid, off, n) + data == want


@pytest.mark.parametrize("vec", GEN, ids=[f"{v[0]}:{v[1]}" for v in GEN])
def test_gen_vectors(vec: list[str]) -> None:
    size, seed, crc_hex, offset, data_hex = int(vec[0]), int(vec[1]), vec[2], int(vec[3]), vec[4]
    want = unhex(data_hex)
    assert gen_bytes(size, seed, offset, 32) == want
    whole = gen_bytes(size, seed)
    assert len(whole) == size
    assert whole[offset : offset + 32] == want
    assert crc32(whole) == int(crc_hex, 16)
    assert gen_crc32(size, seed) == int(crc_hex, 16)
    name = parse_gen_name(f"gen:{size}:{seed}")
    assert name is not None and (name.size, name.seed) == (size, seed)


def test_crc32_check_value() -> None:
    assert crc32(b"123456789") == 0xCBF43926


@pytest.mark.parametrize("bad", ["gen:", "gen:1", "gen:01:2", "gen:1:02", "gen:-1:2", "gen:1:2:3",
                                 "gen:1:18446744073709551616", "gen: 1:2"])
def test_malformed_gen_names(bad: str) -> None:
    with pytest.raises(ValueError, match="malformed gen name"):
        parse_gen_name(bad)


def test_non_gen_name() -> None:
    assert parse_gen_name("a.bin") is None


# ---- meta.vectors: what the client expects of a Meta answer ------------------------------------------

META = rows("meta.vectors")


@pytest.mark.parametrize("vec", [v for v in META if v[3].startswith("ok:")],
                         ids=[v[0] for v in META if v[3].startswith("ok:")])
def test_meta_answers(vec: list[str]) -> None:
    """py_client.meta computes the very answer bytes the servers must send, and accepts them."""
    req = file_transfer_pb2.MetaRequest.FromString(unhex(vec[2]))
    entries = [(e.key, e.value) for e in req.entries]
    want = unhex(vec[3].removeprefix("ok:"))
    assert meta.expected_response(entries).SerializeToString(deterministic=True) == want
    resp = file_transfer_pb2.MetaResponse.FromString(want)
    assert meta.check_response(entries, resp) == meta.sorted_entries(entries)
    assert meta.check_response(meta.prepare(entries), resp) == meta.sorted_entries(entries)


@pytest.mark.parametrize("vec", [v for v in META if not v[3].startswith("ok:")],
                         ids=[v[0] for v in META if not v[3].startswith("ok:")])
def test_meta_refusals_break_the_rule_they_name(vec: list[str]) -> None:
    """Every refused body really breaks PROTOCOL.md's rule its outcome names (or is not valid proto3)."""
    name, limit, body, outcome = vec
    assert outcome.startswith("invalid_argument:")
    try:
        req = file_transfer_pb2.MetaRequest.FromString(unhex(body))
    except DecodeError:
        assert "UTF-8" in outcome, name
        return
    keys = [e.key.encode() for e in req.entries]
    values = [e.value.encode() for e in req.entries]
    broken = {
        "limit": len(keys) > int(limit),
        "key length": any(not 1 <= len(k) <= 256 for k in keys),
        "value length": any(len(v) > 4096 for v in values),
        "NUL": any(b"\0" in x for x in keys + values),
        "duplicate": len(set(keys)) < len(keys),
    }
    assert [rule for rule, hit in broken.items() if hit and rule in outcome], f"{name}: {outcome}"


def test_meta_digest_check_value() -> None:
    assert meta.digest([("12345678", "9")]) == crc32(b"12345678\x009\x00")
    assert meta.digest([]) == 0


@pytest.mark.parametrize("prepared", [False, True])
def test_meta_check_catches_a_wrong_answer(prepared: bool) -> None:
    sent = [("b", "2"), ("a", "1")]
    arg: meta.Entries | meta.Prepared = meta.prepare(sent) if prepared else sent
    good = meta.expected_response(sent)
    unsorted = file_transfer_pb2.MetaResponse(entries=list(reversed(good.entries)), digest=good.digest)
    bad_digest = file_transfer_pb2.MetaResponse(entries=good.entries, digest=good.digest ^ 1)
    lost = file_transfer_pb2.MetaResponse(entries=good.entries[:1], digest=meta.digest([("a", "1")]))
    for resp, why in ((unsorted, "first difference"), (bad_digest, "digest"), (lost, "1 entries, sent 2")):
        with pytest.raises(XferError, match=why) as info:
            meta.check_response(arg, resp)
        assert info.value.code == "data_loss"
