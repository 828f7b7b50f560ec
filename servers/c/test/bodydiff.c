/* bodydiff: reqbody against pbwire_check + protobuf-c unpack. */
#include "bodydiff.h"

#include <stdio.h>
#include <string.h>

#include "pbwire.h"
#include "reqbody.h"
#include "xfer/v1/file_transfer.pb-c.h"
#include "xfer/v1/frame.pb-c.h"

#define NAME_FIELD 1

static void *reference(const ProtobufCMessageDescriptor *d, const uint8_t *body, size_t len) {
    if (pbwire_check(body, len, d) != 0) return NULL;
    return protobuf_c_message_unpack(d, NULL, len, body);
}

/* protobuf-c's char* loses the length after a NUL: the wire length is the truth (pbwire.h). */
static int same_string(const char *ref, const uint8_t *body, size_t len, rb_bytes got) {
    size_t n = pbwire_bytes_len(body, len, NAME_FIELD);
    return n == got.len && (n == 0 || memcmp(ref, got.p, n) == 0);
}

static int same_bytes(ProtobufCBinaryData ref, rb_bytes got) {
    return ref.len == got.len && (got.len == 0 || memcmp(ref.data, got.p, got.len) == 0);
}

#define DIFF(type_name, desc, rbtype, decode, cmp)                                                 \
    do {                                                                                           \
        rbtype got;                                                                                \
        int ok = decode(body, len, &got) == 0;                                                     \
        type_name *r = reference(&desc, body, len);                                                \
        int same = ok == (r != NULL) && (!r || (cmp));                                            \
        if (r) protobuf_c_message_free_unpacked(&r->base, NULL);                                   \
        if (!same) {                                                                               \
            snprintf(why, whylen, "%s: in place %s, protobuf-c %s", #rbtype, ok ? "accepts" : "refuses", \
                     r ? "accepts" : "refuses");                                                   \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

int bodydiff_check(const uint8_t *body, size_t len, char *why, size_t whylen) {
    DIFF(Xfer__V1__UploadBeginRequest, xfer__v1__upload_begin_request__descriptor, rb_upload_begin,
         rb_upload_begin_decode,
         same_string(r->name, body, len, got.name) && r->size == got.size && r->chunk_size == got.chunk_size);
    DIFF(Xfer__V1__UploadChunkRequest, xfer__v1__upload_chunk_request__descriptor, rb_upload_chunk,
         rb_upload_chunk_decode,
         r->upload_id == got.upload_id && r->offset == got.offset && same_bytes(r->data, got.data));
    DIFF(Xfer__V1__UploadCommitRequest, xfer__v1__upload_commit_request__descriptor, rb_upload_commit,
         rb_upload_commit_decode, r->upload_id == got.upload_id && r->crc32 == got.crc32);
    DIFF(Xfer__V1__UploadAbortRequest, xfer__v1__upload_abort_request__descriptor, rb_upload_abort,
         rb_upload_abort_decode, r->upload_id == got.upload_id);
    DIFF(Xfer__V1__ReadRequest, xfer__v1__read_request__descriptor, rb_read, rb_read_decode,
         same_string(r->name, body, len, got.name) && r->offset == got.offset && r->length == got.length);
    DIFF(Xfer__V1__EchoRequest, xfer__v1__echo_request__descriptor, rb_echo, rb_echo_decode,
         same_bytes(r->payload, got.payload));
    DIFF(Xfer__V1__StatRequest, xfer__v1__stat_request__descriptor, rb_stat, rb_stat_decode,
         same_string(r->name, body, len, got.name));
    return 0;
}
