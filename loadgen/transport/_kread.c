/* The raw client's kernel-stamped read, in C (loadgen.transport.kernel_stamps.KernelReader).

One `Reader` per connection is the event loop's reader callback for the connection's duplicate
descriptor. Each call is what KernelReader._readable does in Python, without the interpreter:
`recvmsg` with the `SCM_TIMESTAMPNS` control message, the kernel's CLOCK_REALTIME stamp mapped to
CLOCK_MONOTONIC (perf_counter_ns) by an offset sampled once per millisecond of stamps, and the read
handed on. While the connection's body is chunked and between chunks (the Python side says so with
`sink(pieces, marks)`), a read that is exactly one whole chunk is recorded here, as
`ChunkedBody.feed`'s fast path records it: `(t, chunk data)` appended to `pieces` and its compact-token
mark to `marks`; so is a read of several whole chunks and nothing else, as `ChunkedBody._feed` records
it (their data joined into one piece, unmarked). Every other read goes to the Python handlers,
stamped: `received(t, data)`, or `plain(data)` when the kernel gave no stamp; a read error to
`failed(OSError)`, end of file to `eof()`, a closing transport to `closing()`. Where this module is
not built, KernelReader reads in Python. */

#define _GNU_SOURCE  /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#ifndef SO_TIMESTAMPNS
#define SO_TIMESTAMPNS 35
#endif
#ifndef SCM_TIMESTAMPNS
#define SCM_TIMESTAMPNS SO_TIMESTAMPNS
#endif

#define BUF 65536                 /* as kernel_stamps.BUF */
#define RESAMPLE_NS 1000000LL     /* as kernel_stamps.RESAMPLE_NS */
#define GOOD_SAMPLE_NS 20000LL    /* as kernel_stamps._GOOD_SAMPLE_NS */
#define MAX_SIZE_DIGITS 16        /* ChunkedBody.feed's fast path: 0 < cut < 17 */

/* The tuple (t, data), taking the caller's reference to `data` (NULL: an error already set). */
static PyObject *pair_of(long long t, PyObject *data) {
    if (data == NULL) return NULL;
    PyObject *stamp = PyLong_FromLongLong(t);
    PyObject *pair = stamp == NULL ? NULL : PyTuple_New(2);
    if (pair == NULL) {
        Py_XDECREF(stamp);
        Py_DECREF(data);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, stamp);
    PyTuple_SET_ITEM(pair, 1, data);
    return pair;
}

/* The tuple (t, bytes of p[0:n]): a recorded piece, or a handler's arguments. */
static PyObject *stamped(long long t, const char *p, Py_ssize_t n) {
    return pair_of(t, PyBytes_FromStringAndSize(p, n));
}

static char buf[BUF];  /* only ever used with the GIL held, and not across a call into Python */
static long long clock_last = -(1LL << 62);  /* the kernel stamp the offset was last taken for */
static long long clock_offset = 0;           /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
static PyObject *str_is_closing;
static PyObject *token;  /* sse.COMPACT_TOKEN, set by set_token */

static long long now_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void resample(long long kernel_ns) {
    long long before = now_ns(CLOCK_MONOTONIC);
    long long real = now_ns(CLOCK_REALTIME);
    long long after = now_ns(CLOCK_MONOTONIC);
    if (after - before < GOOD_SAMPLE_NS || clock_last < 0)
        clock_offset = real - (before + after) / 2;
    clock_last = kernel_ns;
}

typedef struct {
    PyObject_HEAD
    int fd;
    PyObject *transport, *received, *plain, *failed, *eof, *closing;
    PyObject *pieces, *marks; /* a list and a bytearray while one whole chunk per read is expected */
} Reader;

static int reader_traverse(Reader *self, visitproc visit, void *arg) {
    Py_VISIT(self->transport);
    Py_VISIT(self->received);
    Py_VISIT(self->plain);
    Py_VISIT(self->failed);
    Py_VISIT(self->eof);
    Py_VISIT(self->closing);
    Py_VISIT(self->pieces);
    Py_VISIT(self->marks);
    return 0;
}

static int reader_clear(Reader *self) {
    Py_CLEAR(self->transport);
    Py_CLEAR(self->received);
    Py_CLEAR(self->plain);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->eof);
    Py_CLEAR(self->closing);
    Py_CLEAR(self->pieces);
    Py_CLEAR(self->marks);
    return 0;
}

static void reader_dealloc(Reader *self) {
    PyObject_GC_UnTrack(self);
    reader_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int reader_init(Reader *self, PyObject *args, PyObject *kwds) {
    int fd;
    PyObject *transport, *received, *plain, *failed, *eof, *closing;
    if (!PyArg_ParseTuple(args, "iOOOOOO:Reader", &fd, &transport, &received, &plain, &failed, &eof,
                          &closing))
        return -1;
    reader_clear(self);
    self->fd = fd;
    self->transport = Py_NewRef(transport);
    self->received = Py_NewRef(received);
    self->plain = Py_NewRef(plain);
    self->failed = Py_NewRef(failed);
    self->eof = Py_NewRef(eof);
    self->closing = Py_NewRef(closing);
    return 0;
}

/* The length of a chunk whose size line is buf[0:cut] (hex digits only), or -1. Python's int(x, 16)
   accepts more (signs, spaces, underscores, 0x); a size line of those goes to the Python path, which
   reads it as before. */
static long long hex_size(const char *p, Py_ssize_t cut) {
    unsigned long long size = 0;
    for (Py_ssize_t i = 0; i < cut; i++) {
        char c = p[i];
        int v;
        if (c >= '0' && c <= '9') v = c - '0';
        else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
        else return -1;
        size = (size << 4) | (unsigned long long)v;
    }
    return size > BUF ? -1 : (long long)size;
}

/* The whole chunk at buf[pos:n]: its data's length (> 0), with *data set to where the data starts; 0
   when buf[pos:n] does not start with one (a size line of more than hex digits, a zero size, a chunk
   cut by the read, or no CRLF after its data). */
static long long whole_chunk_at(Py_ssize_t pos, Py_ssize_t n, Py_ssize_t *data) {
    Py_ssize_t cut = -1;
    Py_ssize_t scan = n - pos < MAX_SIZE_DIGITS + 2 ? n - pos : MAX_SIZE_DIGITS + 2;
    for (Py_ssize_t i = 0; i + 1 < scan; i++) {
        if (buf[pos + i] == '\r' && buf[pos + i + 1] == '\n') {
            cut = i;
            break;
        }
    }
    if (cut <= 0) return 0;
    long long size = hex_size(buf + pos, cut);
    if (size <= 0) return 0;
    Py_ssize_t start = pos + cut + 2, end = start + (Py_ssize_t)size;
    if (end + 2 > n || buf[end] != '\r' || buf[end + 1] != '\n') return 0;
    *data = start;
    return size;
}

/* ChunkedBody.feed's compact-token mark of one chunk's data. */
static int token_mark(const char *piece, Py_ssize_t len) {
    if (token == NULL || len < 10 || memcmp(piece, "data: {", 7) != 0 || memcmp(piece + len - 3, "}\n\n", 3) != 0)
        return 0;
    const char *found = memmem(piece, (size_t)len, PyBytes_AS_STRING(token), (size_t)PyBytes_GET_SIZE(token));
    if (found == NULL || found == piece) return 0;
    Py_ssize_t lines = 0;
    for (const char *q = piece; (q = memchr(q, '\n', (size_t)(piece + len - q))) != NULL; q++) lines++;
    return lines == 2;
}

/* A read of whole chunks and nothing else, recorded as ChunkedBody records it: one chunk (the usual
   token event, `feed`'s fast path) as its data with its mark; several (a client that fell behind reads
   token events in batches, `_feed`) as their data joined into one piece, unmarked. 1 when recorded, 0
   when the read is not that (nothing recorded), -1 on a Python error. */
static int whole_chunks(Reader *self, long long t, Py_ssize_t n) {
    Py_ssize_t pos = 0, total = 0, first = 0, data;
    int count = 0;
    while (pos < n) {
        long long size = whole_chunk_at(pos, n, &data);
        if (size <= 0) return 0;
        if (count++ == 0) first = data;
        total += (Py_ssize_t)size;
        pos = data + (Py_ssize_t)size + 2;
    }
    PyObject *pair;
    int mark = 0;
    if (count == 1) {
        mark = token_mark(buf + first, total);
        pair = stamped(t, buf + first, total);
    } else {
        PyObject *joined = PyBytes_FromStringAndSize(NULL, total);
        if (joined != NULL) {
            char *out = PyBytes_AS_STRING(joined);
            for (pos = 0; pos < n;) {
                long long size = whole_chunk_at(pos, n, &data);
                memcpy(out, buf + data, (size_t)size);
                out += size;
                pos = data + (Py_ssize_t)size + 2;
            }
        }
        pair = pair_of(t, joined);
    }
    if (pair == NULL) return -1;
    int failed = PyList_Append(self->pieces, pair);
    Py_DECREF(pair);
    if (failed) return -1;
    Py_ssize_t size_before = PyByteArray_GET_SIZE(self->marks);
    if (PyByteArray_Resize(self->marks, size_before + 1) < 0) return -1;
    PyByteArray_AS_STRING(self->marks)[size_before] = (char)mark;
    return 1;
}

static PyObject *reader_call(Reader *self, PyObject *args, PyObject *kwds) {
    if (self->transport == NULL) Py_RETURN_NONE;  /* cleared */
    PyObject *closing = PyObject_CallMethodNoArgs(self->transport, str_is_closing);
    if (closing == NULL) return NULL;
    int is_closing = PyObject_IsTrue(closing);
    Py_DECREF(closing);
    if (is_closing < 0) return NULL;
    if (is_closing) return PyObject_CallNoArgs(self->closing);

    struct iovec iov = {buf, BUF};
    union {
        char bytes[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } control;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof control.bytes;
    ssize_t n = recvmsg(self->fd, &msg, MSG_DONTWAIT);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) Py_RETURN_NONE;
        PyObject *exc = PyObject_CallFunction(PyExc_OSError, "is", errno, strerror(errno));
        if (exc == NULL) return NULL;
        PyObject *got = PyObject_CallOneArg(self->failed, exc);
        Py_DECREF(exc);
        return got;
    }
    if (n == 0) return PyObject_CallNoArgs(self->eof);

    struct timespec ts;
    int have_stamp = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
            c->cmsg_len >= CMSG_LEN(sizeof ts)) {
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            have_stamp = 1;
            break;
        }
    }
    if (!have_stamp) {
        PyObject *data = PyBytes_FromStringAndSize(buf, n);
        if (data == NULL) return NULL;
        PyObject *got = PyObject_CallOneArg(self->plain, data);
        Py_DECREF(data);
        return got;
    }
    long long kernel_ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    long long away = kernel_ns - clock_last;
    if (!(-RESAMPLE_NS < away && away < RESAMPLE_NS)) resample(kernel_ns);
    long long t = kernel_ns - clock_offset;
    if (self->pieces != NULL) {
        int done = whole_chunks(self, t, (Py_ssize_t)n);
        if (done < 0) return NULL;
        if (done) Py_RETURN_NONE;
    }
    PyObject *pair = stamped(t, buf, (Py_ssize_t)n);
    if (pair == NULL) return NULL;
    PyObject *got = PyObject_Call(self->received, pair, NULL);
    Py_DECREF(pair);
    return got;
}

static PyObject *reader_sink(Reader *self, PyObject *args) {
    PyObject *pieces, *marks;
    if (!PyArg_ParseTuple(args, "OO:sink", &pieces, &marks)) return NULL;
    if (pieces == Py_None || marks == Py_None) {
        Py_CLEAR(self->pieces);
        Py_CLEAR(self->marks);
        Py_RETURN_NONE;
    }
    if (!PyList_Check(pieces) || !PyByteArray_Check(marks)) {
        PyErr_SetString(PyExc_TypeError, "sink(pieces, marks): a list and a bytearray, or None, None");
        return NULL;
    }
    Py_XSETREF(self->pieces, Py_NewRef(pieces));
    Py_XSETREF(self->marks, Py_NewRef(marks));
    Py_RETURN_NONE;
}

static PyObject *reader_release(Reader *self, PyObject *unused) {
    reader_clear(self);
    Py_RETURN_NONE;
}

static PyMethodDef reader_methods[] = {
    {"sink", (PyCFunction)reader_sink, METH_VARARGS,
     "sink(pieces, marks): record whole-chunk reads there; sink(None, None): hand every read on"},
    {"release", (PyCFunction)reader_release, METH_NOARGS, "drop every reference (the reader is done)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "loadgen.transport._kread.Reader",
    .tp_doc = "Reader(fd, transport, received, plain, failed, eof, closing): a connection's kernel-stamped reads",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)reader_init,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_call = (ternaryfunc)reader_call,
    .tp_methods = reader_methods,
};

static PyObject *set_token(PyObject *module, PyObject *arg) {
    if (!PyBytes_Check(arg) || PyBytes_GET_SIZE(arg) == 0) {
        PyErr_SetString(PyExc_TypeError, "set_token(bytes): the compact token event's marker");
        return NULL;
    }
    Py_XSETREF(token, Py_NewRef(arg));
    Py_RETURN_NONE;
}

static PyObject *offset(PyObject *module, PyObject *unused) {
    return Py_BuildValue("LL", clock_last, clock_offset);
}

static PyMethodDef module_methods[] = {
    {"set_token", set_token, METH_O, "set_token(marker): what marks a read as one compact token event"},
    {"offset", offset, METH_NOARGS, "(the kernel stamp the offset was last taken for, the offset), ns"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kread", "Kernel-stamped reads for the raw client, in C.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__kread(void) {
    if (PyType_Ready(&ReaderType) < 0) return NULL;
    str_is_closing = PyUnicode_InternFromString("is_closing");
    if (str_is_closing == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
