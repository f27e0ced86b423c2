/* AMQP 1.0 primitive values <-> Python in C: the hot path of values.py, with the same results.
 *
 * values.py stays the reference. These functions handle the values Service Bus messages carry and
 * decline (return NotImplemented) on anything else: a constructor they do not decode (described values,
 * arrays, decimals, chars), an object they do not encode, and every malformed or out-of-range input. The
 * caller then runs the pure-Python code on the same input, which gives the value or the error it always
 * gave, so the two cannot disagree on errors.
 *
 *   read_value(buf, pos) -> (value, end) | NotImplemented
 *   encode_value(value) -> bytes | NotImplemented
 *   encode_map_items(items) -> bytes | NotImplemented    (a map from its flat key, value, ... list)
 *   decode_sections(buf) -> (header, annotations, properties, application_properties, body) | NotImplemented
 *   lock_token(tag) -> uuid.UUID | NotImplemented   (a 16-byte delivery tag in .NET GUID byte order)
 *   scan_frames(data, skip, head_max[, next_ids, partial]) -> (end, skip, heads)   (compat.IncomingFrames'
 *       frame scan; with its next_ids and partial, the plain transfers' ids counted in C, their heads kept)
 *   delivery_head(ttl_ms, delivery_count, sequence_number, enqueued_time, enqueue_sequence_number,
 *                 locked_until) -> bytes | NotImplemented   (messages._delivery_head)
 *   bind_proton(calls, link, delivery, event, transport, handle, held, events)   (proton's C functions by
 *       name -> address, and its cdata: native.py)
 *   link_state(link) -> the broker's state of a link, or None   (native.link_state)
 *   delivery_event(event) -> (delivery, link, link's state)   (native.delivery_event)
 *   flow_event(event) -> (link, link's state) | None   (native.flow_event)
 *   keep_unsettled(delivery, kept)   (native.keep_unsettled)
 *   drain(collector, handled, methods, lazy, by_transport, touched)   (loop.Loop._dispatch with
 *       reactor.dispatch_event)
 *   delivery_in(link, delivery, credit_target) -> bytes | False | (outcome, settled, tag)   (native.py)
 *   send_raw(link, tag, payload, settled)   (native.send_raw)
 *   settle_all(deliveries, outcome)   (native.settle_all)
 *   write_out(transport, fd, buffer, max_write) -> (capacity, pending)   (loop.TransportIO's write)
 *   configure(ubyte, byte, ushort, short, uint, int32, ulong, float32, symbol, timestamp, uuid_class,
 *             safe_unknown)    (the Python types decoded values take; called once by values.py)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/socket.h>

#define MAX_DEPTH 200 /* deeper nesting is left to the pure-Python code (and its recursion limit) */

static PyTypeObject *T_ubyte, *T_byte, *T_ushort, *T_short, *T_uint, *T_int32, *T_ulong, *T_float32,
    *T_symbol, *T_timestamp, *T_uuid;
static PyObject *safe_unknown, *str_int, *str_is_safe, *str_bytes, *empty_tuple;

/* ---------------------------------------------------------------- decoding */

typedef struct {
    const unsigned char *buf;
    Py_ssize_t len;
} Reader;

static uint16_t be16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static uint64_t be64(const unsigned char *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

/* An instance of an int/float/str subclass made by its tp_new alone: proton's range checks in __init__
 * only repeat what the wire width already guarantees. */
static PyObject *typed(PyTypeObject *type, PyObject *plain) {
    if (plain == NULL) return NULL;
    PyObject *args = PyTuple_Pack(1, plain);
    Py_DECREF(plain);
    if (args == NULL) return NULL;
    PyObject *value = type->tp_new(type, args, NULL);
    Py_DECREF(args);
    return value;
}

static PyObject *make_uuid(const unsigned char *p) {
    PyObject *number = _PyLong_FromByteArray(p, 16, 0, 0);
    if (number == NULL) return NULL;
    PyObject *value = T_uuid->tp_new(T_uuid, empty_tuple, NULL);
    if (value == NULL || PyObject_GenericSetAttr(value, str_int, number) < 0 ||
        PyObject_GenericSetAttr(value, str_is_safe, safe_unknown) < 0) {
        Py_XDECREF(value);
        Py_DECREF(number);
        return NULL;
    }
    Py_DECREF(number);
    return value;
}

/* Sentinel for "decline": NULL with no exception set. Errors of the C API are cleared into it too. */
#define DECLINE() do { PyErr_Clear(); return NULL; } while (0)
#define NEED(n) do { if (pos + (n) > r->len) DECLINE(); } while (0)

static PyObject *read_at(const Reader *r, Py_ssize_t *at, int depth);

static PyObject *read_compound(const Reader *r, int is_map, uint32_t count, Py_ssize_t pos, Py_ssize_t end,
                               Py_ssize_t *at, int depth) {
    if (is_map && (count & 1)) DECLINE();
    if (end > r->len || (Py_ssize_t)count > end - pos) DECLINE(); /* every item takes a byte at least */
    PyObject *out = is_map ? PyDict_New() : PyList_New(count);
    if (out == NULL) DECLINE();
    for (uint32_t i = 0; i < count; i++) {
        PyObject *item = read_at(r, &pos, depth + 1);
        if (item == NULL) { Py_DECREF(out); DECLINE(); }
        if (!is_map) {
            PyList_SET_ITEM(out, i, item);
            continue;
        }
        PyObject *value = read_at(r, &pos, depth + 1);
        i++;
        if (value == NULL) { Py_DECREF(item); Py_DECREF(out); DECLINE(); }
        int failed = PyDict_SetItem(out, item, value);
        Py_DECREF(item);
        Py_DECREF(value);
        if (failed) { Py_DECREF(out); DECLINE(); }
    }
    if (pos != end) { Py_DECREF(out); DECLINE(); }
    *at = end;
    return out;
}

static PyObject *read_at(const Reader *r, Py_ssize_t *at, int depth) {
    Py_ssize_t pos = *at;
    if (depth > MAX_DEPTH || pos < 0) DECLINE();
    NEED(1);
    const unsigned char *b = r->buf;
    unsigned char code = b[pos++];
    PyObject *value;
    Py_ssize_t size;
    switch (code) {
    case 0x40: value = Py_NewRef(Py_None); break;
    case 0x41: value = Py_NewRef(Py_True); break;
    case 0x42: value = Py_NewRef(Py_False); break;
    case 0x43: value = typed(T_uint, PyLong_FromLong(0)); break;
    case 0x44: value = typed(T_ulong, PyLong_FromLong(0)); break;
    case 0x45: value = PyList_New(0); break;
    case 0x50: NEED(1); value = typed(T_ubyte, PyLong_FromLong(b[pos])); pos += 1; break;
    case 0x51: NEED(1); value = typed(T_byte, PyLong_FromLong((int8_t)b[pos])); pos += 1; break;
    case 0x52: NEED(1); value = typed(T_uint, PyLong_FromLong(b[pos])); pos += 1; break;
    case 0x53: NEED(1); value = typed(T_ulong, PyLong_FromLong(b[pos])); pos += 1; break;
    case 0x54: NEED(1); value = typed(T_int32, PyLong_FromLong((int8_t)b[pos])); pos += 1; break;
    case 0x55: NEED(1); value = PyLong_FromLong((int8_t)b[pos]); pos += 1; break;
    case 0x56: NEED(1); value = PyBool_FromLong(b[pos] != 0); pos += 1; break;
    case 0x60: NEED(2); value = typed(T_ushort, PyLong_FromLong(be16(b + pos))); pos += 2; break;
    case 0x61: NEED(2); value = typed(T_short, PyLong_FromLong((int16_t)be16(b + pos))); pos += 2; break;
    case 0x70: NEED(4); value = typed(T_uint, PyLong_FromUnsignedLong(be32(b + pos))); pos += 4; break;
    case 0x71: NEED(4); value = typed(T_int32, PyLong_FromLong((int32_t)be32(b + pos))); pos += 4; break;
    case 0x72: {
        NEED(4);
        double number = PyFloat_Unpack4((const char *)b + pos, 0);
        if (number == -1.0 && PyErr_Occurred()) DECLINE();
        value = typed(T_float32, PyFloat_FromDouble(number));
        pos += 4;
        break;
    }
    case 0x80: NEED(8); value = typed(T_ulong, PyLong_FromUnsignedLongLong(be64(b + pos))); pos += 8; break;
    case 0x81: NEED(8); value = PyLong_FromLongLong((int64_t)be64(b + pos)); pos += 8; break;
    case 0x82: {
        NEED(8);
        double number = PyFloat_Unpack8((const char *)b + pos, 0);
        if (number == -1.0 && PyErr_Occurred()) DECLINE();
        value = PyFloat_FromDouble(number);
        pos += 8;
        break;
    }
    case 0x83: NEED(8); value = typed(T_timestamp, PyLong_FromLongLong((int64_t)be64(b + pos))); pos += 8; break;
    case 0x98: NEED(16); value = make_uuid(b + pos); pos += 16; break;
    case 0xA0: case 0xA1: case 0xA3: case 0xB0: case 0xB1: case 0xB3:
        if (code < 0xB0) { NEED(1); size = b[pos]; pos += 1; }
        else { NEED(4); size = be32(b + pos); pos += 4; }
        NEED(size);
        if (code == 0xA0 || code == 0xB0) value = PyBytes_FromStringAndSize((const char *)b + pos, size);
        else {
            value = PyUnicode_DecodeUTF8((const char *)b + pos, size, NULL);
            if (code == 0xA3 || code == 0xB3) value = typed(T_symbol, value);
        }
        pos += size;
        break;
    case 0xC0: case 0xC1:
        NEED(2);
        *at = pos;
        return read_compound(r, code == 0xC1, b[pos + 1], pos + 2, pos + 1 + b[pos], at, depth);
    case 0xD0: case 0xD1:
        NEED(8);
        *at = pos;
        return read_compound(r, code == 0xD1, be32(b + pos + 4), pos + 8, pos + 4 + (Py_ssize_t)be32(b + pos),
                             at, depth);
    default:
        DECLINE();
    }
    if (value == NULL) DECLINE();
    *at = pos;
    return value;
}

static PyObject *sp_read_value(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "read_value(buf, pos)");
        return NULL;
    }
    if (T_uuid == NULL) Py_RETURN_NOTIMPLEMENTED; /* configure() not called yet */
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    Reader r = {view.buf, view.len};
    PyObject *value = read_at(&r, &pos, 0);
    PyBuffer_Release(&view);
    if (value == NULL) Py_RETURN_NOTIMPLEMENTED;
    PyObject *result = PyTuple_New(2);
    PyObject *end = PyLong_FromSsize_t(pos);
    if (result == NULL || end == NULL) {
        Py_XDECREF(result);
        Py_XDECREF(end);
        Py_DECREF(value);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, value);
    PyTuple_SET_ITEM(result, 1, end);
    return result;
}

/* ---------------------------------------------------------------- encoding */

typedef struct {
    unsigned char *data;
    Py_ssize_t len, cap;
    unsigned char small[512];
} Writer;

static int grow(Writer *w, Py_ssize_t n) {
    if (w->len + n <= w->cap) return 0;
    Py_ssize_t cap = w->cap * 2;
    while (cap < w->len + n) cap *= 2;
    unsigned char *data;
    if (w->data == w->small) {
        data = PyMem_Malloc(cap);
        if (data != NULL) memcpy(data, w->small, w->len);
    } else {
        data = PyMem_Realloc(w->data, cap);
    }
    if (data == NULL) return -1;
    w->data = data;
    w->cap = cap;
    return 0;
}

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static void put_be64(unsigned char *p, uint64_t v) { put_be32(p, v >> 32); put_be32(p + 4, (uint32_t)v); }

static int put_code_be64(Writer *w, unsigned char code, uint64_t v) {
    if (grow(w, 9)) return -1;
    w->data[w->len] = code;
    put_be64(w->data + w->len + 1, v);
    w->len += 9;
    return 0;
}

static int put_sized(Writer *w, unsigned char small, unsigned char large, const char *p, Py_ssize_t n) {
    if (n > 0xFFFFFFFFLL || grow(w, n + 5)) return -1;
    unsigned char *out = w->data + w->len;
    if (n < 256) {
        out[0] = small; out[1] = (unsigned char)n;
        w->len += 2;
    } else {
        out[0] = large;
        put_be32(out + 1, (uint32_t)n);
        w->len += 5;
    }
    memcpy(w->data + w->len, p, n);
    w->len += n;
    return 0;
}

/* An int subclass's value if it lies in [lo, hi], else -1 with `*bad` set. */
static long long ranged(PyObject *value, long long lo, long long hi, int *bad) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred()) || v < lo || v > hi) { *bad = 1; return -1; }
    return v;
}

static int write_value(Writer *w, PyObject *value, int depth);

/* The items of a list (a map's flat key, value, ... list when code is 0xD1), each read by index: writing a
 * uuid reads its `bytes` property, Python code that could in principle change the list. */
static int write_compound(Writer *w, unsigned char code, PyObject *list, int depth) {
    Py_ssize_t count = PyList_GET_SIZE(list);
    if (count > 0xFFFFFFFFLL || grow(w, 9)) return -1;
    Py_ssize_t head = w->len;
    w->len += 9;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *item = Py_NewRef(PyList_GET_ITEM(list, i));
        int failed = write_value(w, item, depth + 1);
        Py_DECREF(item);
        if (failed) return -1;
    }
    if (PyList_GET_SIZE(list) != count) return -1;
    Py_ssize_t body = w->len - head - 9;
    if (body + 4 > 0xFFFFFFFFLL) return -1;
    w->data[head] = code;
    put_be32(w->data + head + 1, (uint32_t)(body + 4));
    put_be32(w->data + head + 5, (uint32_t)count);
    return 0;
}

static int write_map(Writer *w, PyObject *dict, int depth) {
    Py_ssize_t count = PyDict_GET_SIZE(dict), i = 0;
    if (grow(w, 9)) return -1;
    Py_ssize_t head = w->len;
    w->len += 9;
    PyObject *key, *value;
    while (PyDict_Next(dict, &i, &key, &value)) {
        Py_INCREF(key);
        Py_INCREF(value);
        int failed = write_value(w, key, depth + 1) || write_value(w, value, depth + 1);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed) return -1;
    }
    if (PyDict_GET_SIZE(dict) != count) return -1;
    Py_ssize_t body = w->len - head - 9;
    if (body + 4 > 0xFFFFFFFFLL) return -1;
    w->data[head] = 0xD1;
    put_be32(w->data + head + 1, (uint32_t)(body + 4));
    put_be32(w->data + head + 5, (uint32_t)(2 * count));
    return 0;
}

/* 0 when written, -1 to decline (an exception may be set; the caller clears it). */
static int write_value(Writer *w, PyObject *value, int depth) {
    if (depth > MAX_DEPTH) return -1;
    PyTypeObject *kind = Py_TYPE(value);
    int bad = 0;
    if (value == Py_None || kind == &PyBool_Type) {
        if (grow(w, 1)) return -1;
        w->data[w->len++] = value == Py_None ? 0x40 : value == Py_True ? 0x41 : 0x42;
        return 0;
    }
    if (kind == &PyLong_Type) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(value);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
            return put_code_be64(w, 0x80, u);
        }
        if (overflow < 0) return -1;
        if (v >= -128 && v <= 127) {
            if (grow(w, 2)) return -1;
            w->data[w->len] = 0x55;
            w->data[w->len + 1] = (unsigned char)v;
            w->len += 2;
            return 0;
        }
        return put_code_be64(w, 0x81, (uint64_t)v);
    }
    if (kind == &PyUnicode_Type || kind == T_symbol) {
        Py_ssize_t n;
        const char *text = PyUnicode_AsUTF8AndSize(value, &n);
        if (text == NULL) return -1;
        return kind == T_symbol ? put_sized(w, 0xA3, 0xB3, text, n) : put_sized(w, 0xA1, 0xB1, text, n);
    }
    if (kind == &PyBytes_Type)
        return put_sized(w, 0xA0, 0xB0, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
    if (kind == &PyByteArray_Type)
        return put_sized(w, 0xA0, 0xB0, PyByteArray_AS_STRING(value), PyByteArray_GET_SIZE(value));
    if (kind == T_timestamp) {
        long long v = ranged(value, INT64_MIN, INT64_MAX, &bad);
        return bad ? -1 : put_code_be64(w, 0x83, (uint64_t)v);
    }
    if (kind == T_uuid) {
        PyObject *raw = PyObject_GetAttr(value, str_bytes);
        if (raw == NULL) return -1;
        int failed = !PyBytes_Check(raw) || PyBytes_GET_SIZE(raw) != 16 || grow(w, 17);
        if (!failed) {
            w->data[w->len] = 0x98;
            memcpy(w->data + w->len + 1, PyBytes_AS_STRING(raw), 16);
            w->len += 17;
        }
        Py_DECREF(raw);
        return failed ? -1 : 0;
    }
    if (kind == &PyFloat_Type || kind == T_float32) {
        int four = kind == T_float32;
        if (grow(w, 9)) return -1;
        w->data[w->len] = four ? 0x72 : 0x82;
        if ((four ? PyFloat_Pack4(PyFloat_AS_DOUBLE(value), (char *)w->data + w->len + 1, 0)
                  : PyFloat_Pack8(PyFloat_AS_DOUBLE(value), (char *)w->data + w->len + 1, 0)) < 0)
            return -1;
        w->len += four ? 5 : 9;
        return 0;
    }
    if (kind == T_ulong) {
        unsigned long long u = PyLong_AsUnsignedLongLong(value);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        return put_code_be64(w, 0x80, u);
    }
    if (kind == T_uint || kind == T_int32 || kind == T_ubyte || kind == T_byte || kind == T_ushort ||
        kind == T_short) {
        unsigned char code;
        int width;
        long long v;
        if (kind == T_uint) { code = 0x70; width = 4; v = ranged(value, 0, 0xFFFFFFFFLL, &bad); }
        else if (kind == T_int32) { code = 0x71; width = 4; v = ranged(value, INT32_MIN, INT32_MAX, &bad); }
        else if (kind == T_ubyte) { code = 0x50; width = 1; v = ranged(value, 0, 255, &bad); }
        else if (kind == T_byte) { code = 0x51; width = 1; v = ranged(value, -128, 127, &bad); }
        else if (kind == T_ushort) { code = 0x60; width = 2; v = ranged(value, 0, 0xFFFF, &bad); }
        else { code = 0x61; width = 2; v = ranged(value, INT16_MIN, INT16_MAX, &bad); }
        if (bad || grow(w, 1 + width)) return -1;
        unsigned char *out = w->data + w->len;
        out[0] = code;
        for (int i = 0; i < width; i++) out[1 + i] = (unsigned char)((uint64_t)v >> (8 * (width - 1 - i)));
        w->len += 1 + width;
        return 0;
    }
    if (kind == &PyDict_Type) return write_map(w, value, depth);
    if (kind == &PyList_Type) return write_compound(w, 0xD0, value, depth);
    return -1; /* datetime, memoryview, proton's other types, anything else: the Python code decides */
}

static PyObject *finish(Writer *w, int failed) {
    PyObject *out = NULL;
    if (!failed) out = PyBytes_FromStringAndSize((const char *)w->data, w->len);
    if (w->data != w->small) PyMem_Free(w->data);
    if (out == NULL) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    return out;
}

static void writer_init(Writer *w) {
    w->data = w->small;
    w->len = 0;
    w->cap = sizeof w->small;
}

static PyObject *sp_encode_value(PyObject *Py_UNUSED(self), PyObject *value) {
    if (T_uuid == NULL) Py_RETURN_NOTIMPLEMENTED; /* configure() not called yet */
    Writer w;
    writer_init(&w);
    return finish(&w, write_value(&w, value, 0));
}

static PyObject *sp_encode_map_items(PyObject *Py_UNUSED(self), PyObject *items) {
    if (T_uuid == NULL || !PyList_CheckExact(items)) Py_RETURN_NOTIMPLEMENTED;
    Writer w;
    writer_init(&w);
    return finish(&w, write_compound(&w, 0xD1, items, 0));
}

/* ---------------------------------------------------------------- message sections */

#define HEADER 0x70
#define DELIVERY_ANNOTATIONS 0x71
#define DATA 0x75
#define FOOTER 0x78

/* Position after the encoded value at pos (described values included), or -1. */
static Py_ssize_t skip(const Reader *r, Py_ssize_t pos, int depth) {
    if (depth > MAX_DEPTH || pos >= r->len) return -1;
    unsigned char code = r->buf[pos];
    Py_ssize_t end;
    if (code == 0x00) {
        Py_ssize_t value = skip(r, pos + 1, depth + 1);
        return value < 0 ? -1 : skip(r, value, depth + 1);
    }
    switch (code >> 4) {
    case 0x4: end = code <= 0x45 ? pos + 1 : -1; break;
    case 0x5: end = code <= 0x56 ? pos + 2 : -1; break;
    case 0x6: end = code <= 0x61 ? pos + 3 : -1; break;
    case 0x7: end = code <= 0x74 ? pos + 5 : -1; break;
    case 0x8: end = code <= 0x84 ? pos + 9 : -1; break;
    case 0x9: end = code == 0x94 || code == 0x98 ? pos + 17 : -1; break;
    case 0xA: case 0xC: case 0xE:
        if (code != 0xA0 && code != 0xA1 && code != 0xA3 && code != 0xC0 && code != 0xC1 && code != 0xE0)
            return -1;
        end = pos + 1 < r->len ? pos + 2 + r->buf[pos + 1] : -1;
        break;
    case 0xB: case 0xD: case 0xF:
        if (code != 0xB0 && code != 0xB1 && code != 0xB3 && code != 0xD0 && code != 0xD1 && code != 0xF0)
            return -1;
        end = pos + 5 <= r->len ? pos + 5 + (Py_ssize_t)be32(r->buf + pos + 1) : -1;
        break;
    default: return -1;
    }
    return end > r->len ? -1 : end;
}

/* codec.decode_sections' pass over a message as a client sent it, for the common form (small-ulong
 * descriptors, values read_value handles, each section once, header and properties before the body):
 *   decode_sections(buf: bytes) -> (header, annotations, properties, application_properties, body)
 * each section's value, None where absent (delivery-annotations read and dropped), the body sections and
 * footer as one bytes; NotImplemented for anything else, which codec.py then reads (or rejects) itself. */
static PyObject *sp_decode_sections(PyObject *Py_UNUSED(self), PyObject *buf) {
    if (T_uuid == NULL || !PyBytes_CheckExact(buf)) Py_RETURN_NOTIMPLEMENTED;
    Reader r = {(const unsigned char *)PyBytes_AS_STRING(buf), PyBytes_GET_SIZE(buf)};
    PyObject *found[4] = {NULL, NULL, NULL, NULL};
    Py_ssize_t spans[8][2], nspans = 0, pos = 0, total = 0;
    unsigned seen = 0;
    while (pos < r.len) {
        Py_ssize_t start = pos;
        if (pos + 3 > r.len || r.buf[pos] != 0x00 || r.buf[pos + 1] != 0x53 || r.buf[pos + 2] < HEADER ||
            r.buf[pos + 2] > FOOTER)
            goto decline;
        unsigned char code = r.buf[pos + 2];
        pos += 3;
        if (code >= DATA) {
            pos = skip(&r, pos, 0);
            if (pos < 0) goto decline;
            if (nspans && spans[nspans - 1][1] == start) spans[nspans - 1][1] = pos;
            else if (nspans == 8) goto decline;
            else { spans[nspans][0] = start; spans[nspans][1] = pos; nspans++; }
            continue;
        }
        if (code != DELIVERY_ANNOTATIONS && nspans) goto decline;
        PyObject *value = read_at(&r, &pos, 0);
        if (value == NULL) goto decline;
        if (code == DELIVERY_ANNOTATIONS) Py_DECREF(value);
        else {
            int slot = code == HEADER ? 0 : code - 0x71; /* annotations 0x72, properties 0x73, app 0x74 */
            if (seen & (1u << slot)) { Py_DECREF(value); goto decline; } /* a section twice: each applies */
            seen |= 1u << slot;
            if (value == Py_None) { Py_DECREF(value); value = NULL; } /* a null section: as if absent */
            found[slot] = value;
        }
    }
    if (!nspans) goto decline;
    PyObject *body;
    if (nspans == 1 && spans[0][0] == 0 && spans[0][1] == r.len) body = Py_NewRef(buf);
    else {
        for (Py_ssize_t i = 0; i < nspans; i++) total += spans[i][1] - spans[i][0];
        body = PyBytes_FromStringAndSize(NULL, total);
        if (body == NULL) goto decline;
        char *out = PyBytes_AS_STRING(body);
        for (Py_ssize_t i = 0; i < nspans; i++) {
            memcpy(out, r.buf + spans[i][0], spans[i][1] - spans[i][0]);
            out += spans[i][1] - spans[i][0];
        }
    }
    PyObject *result = PyTuple_New(5);
    if (result == NULL) { Py_DECREF(body); goto decline; }
    for (int i = 0; i < 4; i++) PyTuple_SET_ITEM(result, i, found[i] ? found[i] : Py_NewRef(Py_None));
    PyTuple_SET_ITEM(result, 4, body);
    return result;
decline:
    for (int i = 0; i < 4; i++) Py_XDECREF(found[i]);
    PyErr_Clear();
    Py_RETURN_NOTIMPLEMENTED;
}

/* ---------------------------------------------------------------- settlement and frames */

/* uuid.UUID(bytes_le=tag): a peek-lock delivery's tag is its lock token in .NET GUID byte order. */
static PyObject *sp_lock_token(PyObject *Py_UNUSED(self), PyObject *tag) {
    if (T_uuid == NULL || !PyBytes_CheckExact(tag) || PyBytes_GET_SIZE(tag) != 16) Py_RETURN_NOTIMPLEMENTED;
    const unsigned char *le = (const unsigned char *)PyBytes_AS_STRING(tag);
    unsigned char be[16] = {le[3], le[2], le[1], le[0], le[5], le[4], le[7], le[6]};
    memcpy(be + 8, le + 8, 8);
    return make_uuid(be);
}

/* The frames of `data` whose head compat.IncomingFrames reads: begin, attach and transfer performatives.
 * The same walk as compat._scan_frames (the reference): `skip` bytes of the frame before are passed over, the
 * protocol header skipped, each frame's first min(size, head_max) bytes (its head) examined, and the walk
 * stops before a head that is not all in `data`. Any bytes are valid input: nothing to decline. */
/* A transfer whose delivery-id is the one its session expects, that starts and ends a delivery of the default
 * message-format (no more frames, format 0 or absent), while no delivery of the connection is arriving in
 * parts: IncomingFrames._read_frame would only count the id, so it is counted here (next_ids[channel]) and
 * its head not handed over. 1: counted; 0: not such a transfer (left to Python, nothing changed); -1: error. */
static int count_plain_transfer(const unsigned char *f, Py_ssize_t head, PyObject *next_ids) {
    Py_ssize_t pos = (Py_ssize_t)f[4] * 4 + 3, end;
    uint32_t count;
    if (pos + 3 > head) return 0;
    if (f[pos] == 0xC0) {
        end = pos + 2 + f[pos + 1];
        count = f[pos + 2];
        pos += 3;
    } else if (f[pos] == 0xD0 && pos + 9 <= head) {
        end = pos + 5 + (Py_ssize_t)be32(f + pos + 1);
        count = be32(f + pos + 5);
        pos += 9;
    } else return 0;
    if (end > head) end = head;
    uint32_t numbers[2];
    for (uint32_t i = 0; i < count && i < 6; i++) {
        if (pos >= end) return 0;
        unsigned char code = f[pos];
        if (i < 2 || i == 3) { /* handle, delivery-id, message-format: uints (a format of 0 or null) */
            uint32_t value;
            if (code == 0x43) { value = 0; pos += 1; }
            else if (code == 0x52 && pos + 2 <= end) { value = f[pos + 1]; pos += 2; }
            else if (code == 0x70 && pos + 5 <= end) { value = be32(f + pos + 1); pos += 5; }
            else if (code == 0x40 && i == 3) { value = 0; pos += 1; }
            else return 0;
            if (i < 2) numbers[i] = value;
            else if (value) return 0;
        } else if (i == 2) { /* the tag: binary or null */
            if (code == 0xA0 && pos + 2 <= end) pos += 2 + f[pos + 1];
            else if (code == 0xB0 && pos + 5 <= end) pos += 5 + (Py_ssize_t)be32(f + pos + 1);
            else if (code == 0x40) pos += 1;
            else return 0;
        } else if (code == 0x40 || code == 0x41 || code == 0x42 || (code == 0x56 && pos + 2 <= end)) {
            if (i == 5 && (code == 0x41 || (code == 0x56 && f[pos + 1]))) return 0; /* more: in parts */
            pos += code == 0x56 ? 2 : 1;
        } else return 0;
    }
    if (count < 2 || pos > end) return 0;
    PyObject *channel = PyLong_FromLong(be16(f + 6));
    if (channel == NULL) return -1;
    PyObject *expected = PyDict_GetItemWithError(next_ids, channel);
    int counted = 0;
    if (expected == NULL && PyErr_Occurred()) goto done;
    if (expected != NULL) {
        unsigned long want = PyLong_Check(expected) ? PyLong_AsUnsignedLong(expected) : (unsigned long)-1;
        if (want == (unsigned long)-1 && PyErr_Occurred()) PyErr_Clear();
        if (want != numbers[1]) goto done; /* out of sequence: Python renumbers it */
    }
    PyObject *next = PyLong_FromUnsignedLong((numbers[1] + 1) & 0xFFFFFFFFu);
    if (next == NULL) { counted = -1; goto done; }
    counted = PyDict_SetItem(next_ids, channel, next) < 0 ? -1 : 1;
    Py_DECREF(next);
done:
    if (expected == NULL && PyErr_Occurred()) counted = -1;
    Py_DECREF(channel);
    return counted;
}

static PyObject *sp_scan_frames(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "scan_frames(data, skip, head_max[, next_ids, partial])");
        return NULL;
    }
    PyObject *next_ids = nargs == 5 ? args[3] : NULL, *partial = nargs == 5 ? args[4] : NULL;
    if (next_ids != NULL && (!PyDict_CheckExact(next_ids) || !PySet_Check(partial))) {
        PyErr_SetString(PyExc_TypeError, "scan_frames: next_ids is a dict and partial a set");
        return NULL;
    }
    Py_ssize_t skip = PyLong_AsSsize_t(args[1]), head_max = PyLong_AsSsize_t(args[2]);
    if ((skip == -1 || head_max == -1) && PyErr_Occurred()) return NULL;
    if (skip < 0 || head_max < 8) {
        PyErr_SetString(PyExc_ValueError, "scan_frames: skip >= 0 and head_max >= 8");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = view.buf;
    Py_ssize_t pos = 0, end = view.len;
    PyObject *heads = PyList_New(0);
    if (heads == NULL) goto fail;
    /* the plain transfers before the first head handed over are counted here, while no delivery arrives in
     * parts: the dict then changes in the order _read_frame would have changed it */
    int counting = next_ids != NULL && PySet_GET_SIZE(partial) == 0;
    while (pos < end) {
        if (skip) {
            Py_ssize_t step = skip < end - pos ? skip : end - pos;
            skip -= step;
            pos += step;
            continue;
        }
        if (end - pos < 8) break;
        if (memcmp(b + pos, "AMQP", 4) == 0) { /* the protocol header, not a frame */
            pos += 8;
            continue;
        }
        Py_ssize_t size = (Py_ssize_t)be32(b + pos);
        if (size < 8) size = 8;
        Py_ssize_t head = size < head_max ? size : head_max;
        if (end - pos < head) break;
        const unsigned char *f = b + pos;
        Py_ssize_t body = (Py_ssize_t)f[4] * 4;
        if (f[5] == 0 && head >= body + 3 && f[body] == 0x00 && f[body + 1] == 0x53 &&
            (f[body + 2] == 0x11 || f[body + 2] == 0x12 || f[body + 2] == 0x14)) {
            int counted = counting && f[body + 2] == 0x14 ? count_plain_transfer(f, head, next_ids) : 0;
            if (counted < 0) goto fail;
            if (counted) {
                pos += head;
                skip = size - head;
                continue;
            }
            counting = 0; /* Python reads this head after the scan: the later ones too, in their order */
            PyObject *entry = Py_BuildValue("(nn)", pos, head);
            if (entry == NULL || PyList_Append(heads, entry) < 0) {
                Py_XDECREF(entry);
                goto fail;
            }
            Py_DECREF(entry);
        }
        pos += head;
        skip = size - head;
    }
    PyBuffer_Release(&view);
    PyObject *result = Py_BuildValue("(nnN)", pos, skip, heads);
    return result;
fail:
    Py_XDECREF(heads);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---------------------------------------------------------------- a delivery's head */

static const char KEY_SEQUENCE[] = "x-opt-sequence-number", KEY_ENQUEUED[] = "x-opt-enqueued-time",
                  KEY_ENQUEUE_SEQUENCE[] = "x-opt-enqueue-sequence-number", KEY_LOCKED[] = "x-opt-locked-until";

static unsigned char *put_key(unsigned char *p, const char *key, size_t n) {
    *p++ = 0xa3;
    *p++ = (unsigned char)n;
    memcpy(p, key, n);
    return p + n;
}

/* messages._long: a smalllong from -128 to 127, else a long */
static unsigned char *put_long(unsigned char *p, long long v) {
    if (v >= -128 && v <= 127) {
        *p++ = 0x55;
        *p++ = (unsigned char)(v & 0xff);
        return p;
    }
    *p++ = 0x81;
    put_be64(p, (uint64_t)v);
    return p + 8;
}

/* round(seconds * 1000) as Python computes it (ties to even), as a timestamp; 0 when it does not fit one */
static int put_ms(unsigned char **p, PyObject *seconds) {
    if (!PyFloat_CheckExact(seconds)) return 0;
    double ms = nearbyint(PyFloat_AS_DOUBLE(seconds) * 1000);
    if (!(ms >= -9223372036854775808.0 && ms < 9223372036854775808.0)) return 0; /* NaN, infinities too */
    *(*p)++ = 0x83;
    put_be64(*p, (uint64_t)(long long)ms);
    *p += 8;
    return 1;
}

static PyObject *sp_delivery_head(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "delivery_head() takes 6 arguments");
        return NULL;
    }
    PyObject *ttl = args[0], *locked = args[5];
    for (int i = 0; i < 5; i++)
        if (i != 3 && !(i == 0 && ttl == Py_None) && !PyLong_CheckExact(args[i])) Py_RETURN_NOTIMPLEMENTED;
    int bad = 0;
    long long ttl_ms = ttl == Py_None ? 0 : ranged(ttl, 0, LLONG_MAX, &bad);
    long long count = ranged(args[1], 0, 0xffffffffLL, &bad);
    long long sequence = ranged(args[2], LLONG_MIN, LLONG_MAX, &bad);
    long long enqueue_sequence = ranged(args[4], LLONG_MIN, LLONG_MAX, &bad);
    if (bad) Py_RETURN_NOTIMPLEMENTED;
    unsigned char out[200], *p = out;
    /* the header: durable, priority 4, ttl, first-acquirer false, delivery-count */
    unsigned char fields[16], *f = fields;
    *f++ = 0x41;
    *f++ = 0x50;
    *f++ = 4;
    if (ttl == Py_None) {
        *f++ = 0x40;
    } else {
        *f++ = 0x70;
        put_be32(f, (uint32_t)(ttl_ms < 0xffffffffLL ? ttl_ms : 0xffffffffLL));
        f += 4;
    }
    *f++ = 0x42;
    if (count == 0) {
        *f++ = 0x43;
    } else if (count < 256) {
        *f++ = 0x52;
        *f++ = (unsigned char)count;
    } else {
        *f++ = 0x70;
        put_be32(f, (uint32_t)count);
        f += 4;
    }
    *p++ = 0x00;
    *p++ = 0x53;
    *p++ = 0x70;
    *p++ = 0xc0;
    *p++ = (unsigned char)(f - fields + 1);
    *p++ = 5;
    memcpy(p, fields, (size_t)(f - fields));
    p += f - fields;
    /* the message annotations: a map32 of the broker's x-opt-* values */
    *p++ = 0x00;
    *p++ = 0x53;
    *p++ = 0x72;
    unsigned char *head = p;
    p += 9;
    p = put_key(p, KEY_SEQUENCE, sizeof KEY_SEQUENCE - 1);
    p = put_long(p, sequence);
    p = put_key(p, KEY_ENQUEUED, sizeof KEY_ENQUEUED - 1);
    if (!put_ms(&p, args[3])) Py_RETURN_NOTIMPLEMENTED;
    p = put_key(p, KEY_ENQUEUE_SEQUENCE, sizeof KEY_ENQUEUE_SEQUENCE - 1);
    p = put_long(p, enqueue_sequence);
    uint32_t items = 6;
    if (locked != Py_None) {
        p = put_key(p, KEY_LOCKED, sizeof KEY_LOCKED - 1);
        if (!put_ms(&p, locked)) Py_RETURN_NOTIMPLEMENTED;
        items = 8;
    }
    head[0] = 0xd1;
    put_be32(head + 1, (uint32_t)(p - head - 5));
    put_be32(head + 5, items);
    return PyBytes_FromStringAndSize((const char *)out, p - out);
}

/* ---------------------------------------------------------------- a transport's output */

/* proton's C calls made with the GIL held: through cffi each one releases and takes it again, a fifth of a
 * microsecond a call while the broker's other threads exist. compat.native_proton() hands their addresses
 * over once, by name (PROTON_CALLS). */
typedef struct pn_transport_t pn_transport_t;
typedef struct pn_link_t pn_link_t;
typedef struct pn_delivery_t pn_delivery_t;
typedef struct pn_disposition_t pn_disposition_t;
typedef struct pn_collector_t pn_collector_t;
typedef struct pn_event_t pn_event_t;
typedef struct pn_connection_t pn_connection_t;
typedef struct pn_record_t pn_record_t;
static Py_ssize_t (*pn_pending)(pn_transport_t *), (*pn_capacity)(pn_transport_t *);
static Py_ssize_t (*pn_peek)(pn_transport_t *, char *, size_t);
static void (*pn_pop)(pn_transport_t *, size_t);
static int (*pn_close_head)(pn_transport_t *);
static _Bool (*pn_is_sender)(pn_link_t *), (*pn_advance)(pn_link_t *);
static _Bool (*pn_partial)(pn_delivery_t *), (*pn_readable)(pn_delivery_t *);
static size_t (*pn_delivery_pending)(pn_delivery_t *);
static Py_ssize_t (*pn_recv)(pn_link_t *, char *, size_t);
static int (*pn_credit)(pn_link_t *), (*pn_link_state)(pn_link_t *);
static void (*pn_flow)(pn_link_t *, int);
static void (*pn_update)(pn_delivery_t *, uint64_t);
static void (*pn_settle)(pn_delivery_t *);
static int (*pn_decref)(void *);
static uint64_t (*pn_remote_state)(pn_delivery_t *);
typedef struct {
    size_t size;
    const char *start;
} pn_bytes_t;
static pn_bytes_t (*pn_tag)(pn_delivery_t *);
static pn_delivery_t *(*pn_new_delivery)(pn_link_t *, pn_bytes_t);
static Py_ssize_t (*pn_send)(pn_link_t *, const char *, size_t);
static _Bool (*pn_settled)(pn_delivery_t *);
static pn_disposition_t *(*pn_local)(pn_delivery_t *), *(*pn_remote)(pn_delivery_t *);
static _Bool (*pn_is_failed)(pn_disposition_t *), (*pn_is_undeliverable)(pn_disposition_t *);
static void (*pn_set_failed)(pn_disposition_t *, _Bool), (*pn_set_undeliverable)(pn_disposition_t *, _Bool);
static pn_event_t *(*pn_collector_peek)(pn_collector_t *);
static _Bool (*pn_collector_pop)(pn_collector_t *);
static int (*pn_event_type)(pn_event_t *);
static pn_transport_t *(*pn_event_transport)(pn_event_t *);
static pn_connection_t *(*pn_event_connection)(pn_event_t *);
static pn_record_t *(*pn_connection_attachments)(pn_connection_t *), *(*pn_link_attachments)(pn_link_t *);
static void *(*pn_record_get_py)(pn_record_t *);
static pn_delivery_t *(*pn_event_delivery)(pn_event_t *);
static pn_link_t *(*pn_event_link)(pn_event_t *);
static void (*pn_incref)(void *);

#define BOUND(name, slot) {name, (void **)&slot}
static const struct {
    const char *name;
    void **slot;
} PROTON_CALLS[] = {
    BOUND("pn_transport_pending", pn_pending), BOUND("pn_transport_peek", pn_peek),
    BOUND("pn_transport_pop", pn_pop), BOUND("pn_transport_capacity", pn_capacity),
    BOUND("pn_transport_close_head", pn_close_head), BOUND("pn_link_is_sender", pn_is_sender),
    BOUND("pn_link_advance", pn_advance), BOUND("pn_delivery_partial", pn_partial),
    BOUND("pn_delivery_readable", pn_readable), BOUND("pn_delivery_pending", pn_delivery_pending),
    BOUND("pn_link_recv", pn_recv), BOUND("pn_link_credit", pn_credit), BOUND("pn_link_state", pn_link_state),
    BOUND("pn_link_flow", pn_flow), BOUND("pn_delivery_update", pn_update),
    BOUND("pn_delivery_settle", pn_settle), BOUND("pn_decref", pn_decref),
    BOUND("pn_delivery_remote_state", pn_remote_state), BOUND("pn_delivery_local", pn_local),
    BOUND("pn_delivery_remote", pn_remote), BOUND("pn_disposition_is_failed", pn_is_failed),
    BOUND("pn_disposition_is_undeliverable", pn_is_undeliverable),
    BOUND("pn_disposition_set_failed", pn_set_failed),
    BOUND("pn_disposition_set_undeliverable", pn_set_undeliverable), BOUND("pn_delivery_tag", pn_tag),
    BOUND("pn_delivery_settled", pn_settled), BOUND("pn_delivery", pn_new_delivery),
    BOUND("pn_link_send", pn_send), BOUND("pn_collector_peek", pn_collector_peek),
    BOUND("pn_collector_pop", pn_collector_pop), BOUND("pn_event_type", pn_event_type),
    BOUND("pn_event_transport", pn_event_transport), BOUND("pn_event_connection", pn_event_connection),
    BOUND("pn_connection_attachments", pn_connection_attachments),
    BOUND("pn_link_attachments", pn_link_attachments), BOUND("pn_record_get_py", pn_record_get_py),
    BOUND("pn_event_delivery", pn_event_delivery), BOUND("pn_event_link", pn_event_link),
    BOUND("pn_incref", pn_incref),
};
#define PROTON_CALL_COUNT (sizeof PROTON_CALLS / sizeof PROTON_CALLS[0])
#define PN_LOCAL_ACTIVE 2
#define PN_MODIFIED 0x27

static void *address(PyObject *number) {
    void *p = PyLong_AsVoidPtr(number);
    if (p == NULL && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a null address");
    return p;
}

/* A cffi pointer (cdata) holds its address after its ctype (cffi's CDataObject, the same since cffi 1.0);
 * bind_proton checks that on pointers of known address and keeps the link's, delivery's, event's and
 * transport's ctypes, so that reading one costs a comparison, not cffi's int(ffi.cast("uintptr_t", p))
 * (~280 ns), and making one (an event handed to a handler) an allocation. A cffi handle (what proton's
 * records hold for their Python wrappers' attributes) is such an object whose address is itself, followed
 * by the object it holds; bind_proton checks that on a handle of a known object. */
typedef struct {
    PyObject_HEAD
    PyObject *c_type;
    char *c_data;
    PyObject *c_weakreflist;
} CData;
static PyTypeObject *cdata_type, *handle_type;
static PyObject *link_ctype, *delivery_ctype, *event_ctype, *transport_ctype;
static int event_delivery = -1, event_link_flow = -1, event_transport_closed = -1;
static PyObject *str_handler, *str_sb, *str_close;

static void *pointer_of(PyObject *cdata, PyObject *ctype) {
    if (Py_TYPE(cdata) != cdata_type || ((CData *)cdata)->c_type != ctype || ((CData *)cdata)->c_data == NULL) {
        PyErr_SetString(PyExc_TypeError, ctype == link_ctype ? "not a pn_link_t *"
                        : ctype == delivery_ctype ? "not a pn_delivery_t *" : "not a pn_event_t *");
        return NULL;
    }
    return ((CData *)cdata)->c_data;
}

/* A new cffi pointer of `ctype` (one bind_proton kept) to `p`. */
static PyObject *new_pointer(void *p, PyObject *ctype) {
    CData *cd = PyObject_New(CData, cdata_type);
    if (cd == NULL) return NULL;
    Py_INCREF(ctype);
    cd->c_type = ctype;
    cd->c_data = p;
    cd->c_weakreflist = NULL;
    return (PyObject *)cd;
}

/* The object a proton record holds for its Python wrapper (their attributes' dict), borrowed; NULL: none. */
static PyObject *record_object(pn_record_t *record) {
    void *raw = record == NULL ? NULL : pn_record_get_py(record);
    if (raw == NULL || Py_TYPE((PyObject *)raw) != handle_type) return NULL;
    return *(PyObject **)((char *)raw + sizeof(CData));
}

static int bind_ctype(PyObject *sample, const void *expected, PyObject **ctype) {
    if (Py_TYPE(sample) != cdata_type || ((CData *)sample)->c_data != expected) {
        PyErr_SetString(PyExc_ValueError, "bind_proton: a cdata does not hold its address where expected");
        return -1;
    }
    Py_INCREF(((CData *)sample)->c_type);
    Py_XSETREF(*ctype, ((CData *)sample)->c_type);
    return 0;
}

/* bind_proton(calls, link, delivery, event, transport, handle, held, events): `calls` maps each name of
 * PROTON_CALLS to its address; `link`, `delivery`, `event` and `transport` are proton pointers cast from
 * id(calls) (an address the check knows; it is never dereferenced); `handle` is ffi.new_handle(held);
 * `events` the numbers of proton's DELIVERY, LINK_FLOW and TRANSPORT_CLOSED events. */
static PyObject *sp_bind_proton(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *calls, *link, *delivery, *event, *transport, *handle, *held;
    int events[3];
    if (!PyArg_ParseTuple(args, "O!OOOOOO(iii)", &PyDict_Type, &calls, &link, &delivery, &event, &transport,
                          &handle, &held, &events[0], &events[1], &events[2]))
        return NULL;
    void *found[PROTON_CALL_COUNT];
    for (size_t i = 0; i < PROTON_CALL_COUNT; i++) {
        PyObject *number = PyDict_GetItemString(calls, PROTON_CALLS[i].name);
        if (number == NULL) {
            PyErr_Format(PyExc_KeyError, "bind_proton: no address for %s", PROTON_CALLS[i].name);
            return NULL;
        }
        if ((found[i] = address(number)) == NULL) return NULL;
    }
    PyTypeObject *type = Py_TYPE(link);
    if (PyType_IS_GC(type) || type->tp_basicsize != (Py_ssize_t)sizeof(CData) || Py_TYPE(handle) == type ||
        ((CData *)handle)->c_data != (char *)handle || Py_TYPE(handle)->tp_basicsize < (Py_ssize_t)(sizeof(CData) + sizeof(PyObject *)) ||
        *(PyObject **)((char *)handle + sizeof(CData)) != held) {
        PyErr_SetString(PyExc_ValueError, "bind_proton: cffi's objects are not laid out as expected");
        return NULL;
    }
    cdata_type = type;
    if (bind_ctype(link, calls, &link_ctype) < 0 || bind_ctype(delivery, calls, &delivery_ctype) < 0 ||
        bind_ctype(event, calls, &event_ctype) < 0 || bind_ctype(transport, calls, &transport_ctype) < 0) {
        cdata_type = NULL;
        return NULL;
    }
    handle_type = Py_TYPE(handle);
    event_delivery = events[0], event_link_flow = events[1], event_transport_closed = events[2];
    for (size_t i = 0; i < PROTON_CALL_COUNT; i++) *PROTON_CALLS[i].slot = found[i];
    Py_RETURN_NONE;
}

static int unbound(void) {
    if (pn_pending != NULL && cdata_type != NULL) return 0;
    PyErr_SetString(PyExc_RuntimeError, "bind_proton() was not called");
    return 1;
}

/* native.delivery_in: what on_delivery does first with a delivery event. On the broker's sender link (the
 * client's disposition): (remote outcome, settled, tag). On its receiver: False while the transfer is still
 * arriving; else its payload, the link moved on to the next delivery and, with credit_target > 0, its credit
 * topped up to credit_target once it fell under half of it. */
static PyObject *sp_delivery_in(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "delivery_in(link, delivery, credit_target)");
        return NULL;
    }
    if (unbound()) return NULL;
    pn_link_t *link = pointer_of(args[0], link_ctype);
    pn_delivery_t *delivery = link == NULL ? NULL : pointer_of(args[1], delivery_ctype);
    if (delivery == NULL) return NULL;
    long target = PyLong_AsLong(args[2]);
    if (target == -1 && PyErr_Occurred()) return NULL;
    if (target < 0 || target > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "delivery_in: credit_target out of range");
        return NULL;
    }
    if (pn_is_sender(link)) {
        pn_bytes_t tag = pn_tag(delivery);
        return Py_BuildValue("(KOy#)", (unsigned long long)pn_remote_state(delivery),
                             pn_settled(delivery) ? Py_True : Py_False, tag.start ? tag.start : "",
                             (Py_ssize_t)tag.size);
    }
    if (pn_partial(delivery) || !pn_readable(delivery)) Py_RETURN_FALSE;
    size_t size = pn_delivery_pending(delivery);
    if (size > PY_SSIZE_T_MAX) size = PY_SSIZE_T_MAX;
    PyObject *payload = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (payload == NULL) return NULL;
    Py_ssize_t got = pn_recv(link, PyBytes_AS_STRING(payload), size);
    pn_advance(link);
    if (got != (Py_ssize_t)size && _PyBytes_Resize(&payload, got > 0 ? got : 0) < 0) return NULL;
    if (target > 0) {
        int credit = pn_credit(link);
        if (credit < target / 2 && (pn_link_state(link) & PN_LOCAL_ACTIVE)) pn_flow(link, (int)target - credit);
    }
    return payload;
}

/* native.send_raw: a new delivery with `tag` on the broker's sender `link`, `payload` as its whole message,
 * the link moved on; settled at once when `settled`. */
static PyObject *sp_send_raw(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "send_raw(link, tag, payload, settled)");
        return NULL;
    }
    if (unbound()) return NULL;
    pn_link_t *link = pointer_of(args[0], link_ctype);
    if (link == NULL) return NULL;
    if (!PyBytes_Check(args[1]) || !PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "send_raw: the tag and payload are bytes");
        return NULL;
    }
    int settled = PyObject_IsTrue(args[3]);
    if (settled < 0) return NULL;
    pn_bytes_t tag = {(size_t)PyBytes_GET_SIZE(args[1]), PyBytes_AS_STRING(args[1])};
    pn_delivery_t *delivery = pn_new_delivery(link, tag);
    pn_send(link, PyBytes_AS_STRING(args[2]), (size_t)PyBytes_GET_SIZE(args[2]));
    pn_advance(link);
    if (settled && delivery != NULL) pn_settle(delivery);
    Py_RETURN_NONE;
}

/* native.settle_all: settle the turn's client deliveries (each referenced by the endpoint) with `outcome`,
 * or with 0 echo each one's remote outcome (a modified one's failed and undeliverable flags copied), and let
 * go of them. */
static PyObject *sp_settle_all(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *deliveries;
    unsigned long long outcome;
    if (!PyArg_ParseTuple(args, "O!K", &PyList_Type, &deliveries, &outcome)) return NULL;
    if (unbound()) return NULL;
    Py_ssize_t count = PyList_GET_SIZE(deliveries);
    for (Py_ssize_t i = 0; i < count; i++)
        if (pointer_of(PyList_GET_ITEM(deliveries, i), delivery_ctype) == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        pn_delivery_t *delivery = (pn_delivery_t *)((CData *)PyList_GET_ITEM(deliveries, i))->c_data;
        uint64_t state = outcome ? outcome : pn_remote_state(delivery);
        if (!outcome && state == PN_MODIFIED) {
            pn_disposition_t *local = pn_local(delivery), *remote = pn_remote(delivery);
            pn_set_failed(local, pn_is_failed(remote));
            pn_set_undeliverable(local, pn_is_undeliverable(remote));
        }
        pn_update(delivery, state);
        pn_settle(delivery);
        pn_decref(delivery);
    }
    Py_RETURN_NONE;
}

/* The broker's state of a link (borrowed), or NULL: none. */
static PyObject *state_of(pn_link_t *link) {
    PyObject *attrs = record_object(pn_link_attachments(link));
    return attrs == NULL || !PyDict_Check(attrs) ? NULL : PyDict_GetItemWithError(attrs, str_sb);
}

/* native.link_state: what the broker keeps on a link as `sb` in its wrapper's attributes, or None. */
static PyObject *sp_link_state(PyObject *Py_UNUSED(self), PyObject *link) {
    if (unbound()) return NULL;
    pn_link_t *impl = pointer_of(link, link_ctype);
    if (impl == NULL) return NULL;
    PyObject *state = state_of(impl);
    if (state == NULL && PyErr_Occurred()) return NULL;
    return Py_NewRef(state == NULL ? Py_None : state);
}

/* native.delivery_event: (delivery, link, the link's state or None) of a DELIVERY event. */
static PyObject *sp_delivery_event(PyObject *Py_UNUSED(self), PyObject *event) {
    if (unbound()) return NULL;
    pn_event_t *impl = pointer_of(event, event_ctype);
    if (impl == NULL) return NULL;
    pn_delivery_t *delivery = pn_event_delivery(impl);
    pn_link_t *link = pn_event_link(impl);
    if (delivery == NULL || link == NULL) {
        PyErr_SetString(PyExc_ValueError, "delivery_event: not a delivery's event");
        return NULL;
    }
    PyObject *state = state_of(link);
    if (state == NULL && PyErr_Occurred()) return NULL;
    PyObject *c_delivery = new_pointer(delivery, delivery_ctype), *c_link = new_pointer(link, link_ctype);
    PyObject *result = c_delivery == NULL || c_link == NULL ? NULL
        : PyTuple_Pack(3, c_delivery, c_link, state == NULL ? Py_None : state);
    Py_XDECREF(c_delivery);
    Py_XDECREF(c_link);
    return result;
}

/* native.flow_event: (link, its state) of a LINK_FLOW event whose link is open on the broker's side, has
 * credit and a state; else None. */
static PyObject *sp_flow_event(PyObject *Py_UNUSED(self), PyObject *event) {
    if (unbound()) return NULL;
    pn_event_t *impl = pointer_of(event, event_ctype);
    if (impl == NULL) return NULL;
    pn_link_t *link = pn_event_link(impl);
    if (link == NULL || pn_credit(link) <= 0 || !(pn_link_state(link) & PN_LOCAL_ACTIVE)) Py_RETURN_NONE;
    PyObject *state = state_of(link);
    if (state == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *c_link = new_pointer(link, link_ctype);
    if (c_link == NULL) return NULL;
    PyObject *result = PyTuple_Pack(2, c_link, state);
    Py_DECREF(c_link);
    return result;
}

/* native.keep_unsettled: a client's delivery it settled itself is settled; any other is referenced and
 * appended to `kept` (settled after the commit). */
static PyObject *sp_keep_unsettled(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "keep_unsettled(delivery, kept: list)");
        return NULL;
    }
    if (unbound()) return NULL;
    pn_delivery_t *delivery = pointer_of(args[0], delivery_ctype);
    if (delivery == NULL) return NULL;
    if (pn_settled(delivery)) {
        pn_settle(delivery);
        Py_RETURN_NONE;
    }
    if (PyList_Append(args[1], args[0]) < 0) return NULL;
    pn_incref(delivery);
    Py_RETURN_NONE;
}

/* Hand `event` to its connection's handler's method for `number` (reactor.dispatch_event): -1 on an error. */
static int dispatch_one(pn_event_t *event, int number, PyObject *key, PyObject *methods, PyObject *lazy) {
    pn_connection_t *connection = pn_event_connection(event);
    PyObject *attrs = connection == NULL ? NULL : record_object(pn_connection_attachments(connection));
    if (attrs == NULL || !PyDict_Check(attrs)) return 0;
    PyObject *handler = PyDict_GetItemWithError(attrs, str_handler);
    if (handler == NULL || handler == Py_None) return PyErr_Occurred() ? -1 : 0;
    PyObject *name = PyDict_GetItemWithError(methods, key);
    if (name == NULL) return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(handler);
    PyObject *method;
    int found = _PyObject_LookupAttr(handler, name, &method);
    Py_DECREF(handler);
    if (found <= 0) return found;
    PyObject *c_event = new_pointer(event, event_ctype), *result = NULL;
    if (c_event != NULL) {
        if (number == event_delivery || number == event_link_flow) {
            result = PyObject_CallOneArg(method, c_event);
        } else {
            PyObject *wrapped = PyObject_CallFunctionObjArgs(lazy, c_event, key, NULL);
            if (wrapped != NULL) result = PyObject_CallOneArg(method, wrapped);
            Py_XDECREF(wrapped);
        }
        Py_DECREF(c_event);
    }
    Py_DECREF(method);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

/* native.drain: loop.Loop._dispatch with reactor.dispatch_event: every event of the collector handed to its
 * connection's handler when `handled` has its number (DELIVERY and LINK_FLOW as proton's C event, others
 * through `lazy(event, number)`), every other event's transport (in `by_transport`) added to `touched` and
 * closed on TRANSPORT_CLOSED, the event popped. An error stops the drain with the event still the head. */
static PyObject *sp_drain(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyAnySet_Check(args[1]) || !PyDict_Check(args[2]) || !PyDict_Check(args[4]) ||
        !PySet_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "drain(collector, handled: set, methods: dict, lazy, by_transport: "
                                         "dict, touched: set)");
        return NULL;
    }
    if (unbound()) return NULL;
    pn_collector_t *collector = address(args[0]);
    if (collector == NULL) return NULL;
    PyObject *handled = args[1], *methods = args[2], *lazy = args[3], *by_transport = args[4], *touched = args[5];
    for (pn_event_t *event = pn_collector_peek(collector); event != NULL; event = pn_collector_peek(collector)) {
        int number = pn_event_type(event);
        PyObject *key = PyLong_FromLong(number);
        if (key == NULL) return NULL;
        int wanted = PySet_Contains(handled, key);
        if (wanted < 0 || (wanted && dispatch_one(event, number, key, methods, lazy) < 0)) {
            Py_DECREF(key);
            return NULL;
        }
        Py_DECREF(key);
        pn_transport_t *transport = number == event_delivery ? NULL : pn_event_transport(event);
        if (transport != NULL) {
            PyObject *c_transport = new_pointer(transport, transport_ctype);
            if (c_transport == NULL) return NULL;
            PyObject *io = PyDict_GetItemWithError(by_transport, c_transport);
            Py_DECREF(c_transport);
            if (io == NULL && PyErr_Occurred()) return NULL;
            if (io != NULL) {
                Py_INCREF(io);
                PyObject *closed = NULL;
                int failed = PySet_Add(touched, io) < 0 ||
                    (number == event_transport_closed && (closed = PyObject_CallMethodNoArgs(io, str_close)) == NULL);
                Py_XDECREF(closed);
                Py_DECREF(io);
                if (failed) return NULL;
            }
        }
        pn_collector_pop(collector);
    }
    Py_RETURN_NONE;
}

/* What loop.TransportIO._write does, then its transport's capacity and pending output, as flush reads them:
 * up to max_write bytes of output copied into `buffer` (the loop's) and sent on `fd`; a full socket leaves
 * them for the next poll, any other error of the socket closes the transport's head. */
static PyObject *sp_write_out(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "write_out(transport, fd, buffer, max_write)");
        return NULL;
    }
    if (unbound()) return NULL;
    pn_transport_t *transport = address(args[0]);
    if (transport == NULL) return NULL;
    long fd = PyLong_AsLong(args[1]);
    Py_ssize_t max_write = PyLong_AsSsize_t(args[3]);
    if ((fd == -1 || max_write == -1) && PyErr_Occurred()) return NULL;
    if (fd < 0 || fd > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "write_out: not a file descriptor");
        return NULL;
    }
    Py_buffer out;
    if (PyObject_GetBuffer(args[2], &out, PyBUF_WRITABLE) < 0) return NULL;
    if (max_write > out.len) max_write = out.len;
    Py_ssize_t pending = pn_pending(transport);
    if (pending > 0 && max_write > 0) {
        Py_ssize_t size = pn_peek(transport, out.buf, (size_t)(pending < max_write ? pending : max_write));
        Py_ssize_t sent;
        int error;
        do {
            Py_BEGIN_ALLOW_THREADS
            sent = send((int)fd, out.buf, (size_t)size, MSG_NOSIGNAL);
            error = errno;
            Py_END_ALLOW_THREADS
        } while (sent < 0 && error == EINTR);
        if (sent >= 0)
            pn_pop(transport, (size_t)sent);
        else if (error != EAGAIN && error != EWOULDBLOCK)
            pn_close_head(transport);
    }
    PyBuffer_Release(&out);
    Py_ssize_t capacity = pn_capacity(transport);
    return Py_BuildValue("(nn)", capacity, pn_pending(transport));
}

/* ---------------------------------------------------------------- set-up */

static PyObject *sp_configure(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *types[11], *unknown;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOO", &types[0], &types[1], &types[2], &types[3], &types[4],
                          &types[5], &types[6], &types[7], &types[8], &types[9], &types[10], &unknown))
        return NULL;
    for (int i = 0; i < 11; i++) {
        if (!PyType_Check(types[i])) {
            PyErr_SetString(PyExc_TypeError, "configure() takes types");
            return NULL;
        }
    }
    PyTypeObject **slots[11] = {&T_ubyte, &T_byte, &T_ushort, &T_short, &T_uint, &T_int32, &T_ulong,
                                &T_float32, &T_symbol, &T_timestamp, &T_uuid};
    for (int i = 0; i < 11; i++) {
        Py_INCREF(types[i]);
        Py_XSETREF(*slots[i], (PyTypeObject *)types[i]);
    }
    Py_INCREF(unknown);
    Py_XSETREF(safe_unknown, unknown);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"read_value", (PyCFunction)(void (*)(void))sp_read_value, METH_FASTCALL,
     "(value, end) of the value at pos, or NotImplemented to leave it to the Python code"},
    {"encode_value", sp_encode_value, METH_O, "the encoded value, or NotImplemented"},
    {"encode_map_items", sp_encode_map_items, METH_O,
     "the map encoded from its flat key, value, ... list, or NotImplemented"},
    {"decode_sections", sp_decode_sections, METH_O,
     "(header, annotations, properties, application-properties, body) of a message, or NotImplemented"},
    {"lock_token", sp_lock_token, METH_O, "the lock token of a delivery tag, or NotImplemented"},
    {"scan_frames", (PyCFunction)(void (*)(void))sp_scan_frames, METH_FASTCALL,
     "(end, skip, [(pos, head), ...]): the frame heads of data that compat.IncomingFrames reads"},
    {"delivery_head", (PyCFunction)(void (*)(void))sp_delivery_head, METH_FASTCALL,
     "the header and message annotations of a delivery, or NotImplemented"},
    {"bind_proton", sp_bind_proton, METH_VARARGS, "proton's C functions, by name and address, and its cdata"},
    {"delivery_in", (PyCFunction)(void (*)(void))sp_delivery_in, METH_FASTCALL,
     "a client transfer's payload (False: still arriving), the credit topped up; or a disposition's"},
    {"send_raw", (PyCFunction)(void (*)(void))sp_send_raw, METH_FASTCALL,
     "a new delivery of an encoded message on a sender link"},
    {"settle_all", sp_settle_all, METH_VARARGS, "settle referenced client deliveries with an outcome, let go"},
    {"link_state", sp_link_state, METH_O, "what the broker keeps on a link as `sb`, or None"},
    {"delivery_event", sp_delivery_event, METH_O, "(delivery, link, the link's state) of a delivery event"},
    {"flow_event", sp_flow_event, METH_O, "(link, its state) of a flow event with credit to feed, or None"},
    {"keep_unsettled", (PyCFunction)(void (*)(void))sp_keep_unsettled, METH_FASTCALL,
     "settle a delivery the client settled, else reference it into a list"},
    {"drain", (PyCFunction)(void (*)(void))sp_drain, METH_FASTCALL,
     "hand every event of a collector to its connection's handler; the transports' bookkeeping"},
    {"write_out", (PyCFunction)(void (*)(void))sp_write_out, METH_FASTCALL,
     "(capacity, pending) of a transport after writing its output to a socket"},
    {"configure", sp_configure, METH_VARARGS, "the Python types of decoded values"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_speedups", .m_size = -1, .m_methods = methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    str_int = PyUnicode_InternFromString("int");
    str_is_safe = PyUnicode_InternFromString("is_safe");
    str_bytes = PyUnicode_InternFromString("bytes");
    str_handler = PyUnicode_InternFromString("_handler");
    str_sb = PyUnicode_InternFromString("sb");
    str_close = PyUnicode_InternFromString("close");
    empty_tuple = PyTuple_New(0);
    if (str_int == NULL || str_is_safe == NULL || str_bytes == NULL || empty_tuple == NULL || str_handler == NULL ||
        str_sb == NULL || str_close == NULL)
        return NULL;
    return PyModule_Create(&module);
}
