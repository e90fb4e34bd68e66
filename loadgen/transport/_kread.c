/* The raw client's socket work in C: the kernel-stamped read (loadgen.transport.kernel_stamps.KernelReader)
and the send-time writer (`Sender`, below; dispatch.PreciseWaker.post_write).

One `Reader` per connection is the event loop's reader callback for the connection's duplicate
descriptor. Each call is what KernelReader._readable does in Python, without the interpreter:
`recvmsg` with the `SCM_TIMESTAMPNS` control message, the kernel's CLOCK_REALTIME stamp mapped to
CLOCK_MONOTONIC (perf_counter_ns) by an offset sampled once per millisecond of stamps, and the read
handed on. While the connection's body is chunked and between chunks (the Python side says so with
`sink(pieces, marks)`), a read that is exactly one whole chunk is recorded here, as
`ChunkedBody.feed`'s fast path records it: `(t, chunk data)` appended to `pieces` and its compact-token
mark to `marks` (with `elided`, `sink`'s third argument, the marked read before it goes to its stamp
when it is not the stream's first marked read: chunked.Reads.elided); so is a read of several whole chunks and nothing else, as `ChunkedBody._feed` records
it (their data joined into one piece, unmarked), and so are the data chunks of a read that ends with the
last chunk, `0\r\n\r\n` (one piece, unmarked, as `_feed` records it), the last chunk then handed on. Every other read goes to the Python handlers,
stamped: `received(t, data)`, or `plain(data)` when the kernel gave no stamp; a read error to
`failed(OSError)`, end of file to `eof()`, a closing transport to `closing()`. Where this module is
not built, KernelReader reads in Python and the waker thread writes the requests. */

#define _GNU_SOURCE  /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <stdint.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
    PyObject *ended;          /* (t): a recorded read ended with exactly the last chunk; or NULL */
    PyObject *pieces, *marks; /* a list and a bytearray while one whole chunk per read is expected */
    PyObject *elided;         /* chunked.Reads.elided: the stamps of marked reads let go, or NULL */
    Py_ssize_t first_marked;  /* the first marked piece's index (-1: none yet), kept while elided is set */
} Reader;

static int reader_traverse(Reader *self, visitproc visit, void *arg) {
    Py_VISIT(self->transport);
    Py_VISIT(self->received);
    Py_VISIT(self->plain);
    Py_VISIT(self->failed);
    Py_VISIT(self->eof);
    Py_VISIT(self->closing);
    Py_VISIT(self->ended);
    Py_VISIT(self->pieces);
    Py_VISIT(self->marks);
    Py_VISIT(self->elided);
    return 0;
}

static int reader_clear(Reader *self) {
    Py_CLEAR(self->transport);
    Py_CLEAR(self->received);
    Py_CLEAR(self->plain);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->eof);
    Py_CLEAR(self->closing);
    Py_CLEAR(self->ended);
    Py_CLEAR(self->pieces);
    Py_CLEAR(self->marks);
    Py_CLEAR(self->elided);
    return 0;
}

static void reader_dealloc(Reader *self) {
    PyObject_GC_UnTrack(self);
    reader_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int reader_init(Reader *self, PyObject *args, PyObject *kwds) {
    int fd;
    PyObject *transport, *received, *plain, *failed, *eof, *closing, *ended = Py_None;
    if (!PyArg_ParseTuple(args, "iOOOOOO|O:Reader", &fd, &transport, &received, &plain, &failed, &eof,
                          &closing, &ended))
        return -1;
    reader_clear(self);
    self->fd = fd;
    self->transport = Py_NewRef(transport);
    self->received = Py_NewRef(received);
    self->plain = Py_NewRef(plain);
    self->failed = Py_NewRef(failed);
    self->eof = Py_NewRef(eof);
    self->closing = Py_NewRef(closing);
    if (ended != Py_None) self->ended = Py_NewRef(ended);
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

/* A marked read is about to be recorded: let the one before it go if it is a marked read too and not
   the stream's first (chunked.Reads: its place in `pieces` becomes None, its stamp the next 8 bytes of
   `elided`). The first and the last marked read keep their bytes (the parse decodes those two); the
   reads between them are one compact token event each by their mark, so their stamps are all a parse
   takes from them. Freed here, a read's objects are reused by the next read, not held to the end. */
static int elide_previous(Reader *self) {
    Py_ssize_t p = PyList_GET_SIZE(self->pieces) - 1;
    if (p < 0 || p == self->first_marked || p >= PyByteArray_GET_SIZE(self->marks) ||
        PyByteArray_AS_STRING(self->marks)[p] != 1)
        return 0;
    PyObject *prev = PyList_GET_ITEM(self->pieces, p);
    if (!PyTuple_CheckExact(prev) || PyTuple_GET_SIZE(prev) != 2) return 0;
    long long stamp = PyLong_AsLongLong(PyTuple_GET_ITEM(prev, 0));
    if (stamp == -1 && PyErr_Occurred()) return -1;
    Py_ssize_t size = PyByteArray_GET_SIZE(self->elided);
    if (PyByteArray_Resize(self->elided, size + 8) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(self->elided) + size, &stamp, 8);
    return PyList_SetItem(self->pieces, p, Py_NewRef(Py_None));
}

/* A read of whole chunks and nothing else, recorded as ChunkedBody records it: one chunk (the usual
   token event, `feed`'s fast path) as its data with its mark; several (a client that fell behind reads
   token events in batches, `_feed`) as their data joined into one piece, unmarked. 1 when recorded, 0
   when the read is not that (nothing recorded), -1 on a Python error. */
static int whole_chunks(Reader *self, long long t, Py_ssize_t n, Py_ssize_t *tail) {
    static const char LAST[] = "0\r\n\r\n";  /* the last chunk, no extension, no trailers */
    Py_ssize_t pos = 0, total = 0, first = 0, data, end = n;
    int count = 0;
    while (pos < n) {
        long long size = whole_chunk_at(pos, n, &data);
        if (size <= 0) {
            /* data chunks, then exactly the last chunk (the stream's end with its last events):
               recorded as `_feed` records them, one piece unmarked, the rest for the caller's parser */
            if (count == 0 || n - pos != (Py_ssize_t)sizeof LAST - 1 || memcmp(buf + pos, LAST, sizeof LAST - 1) != 0)
                return 0;
            end = *tail = pos;
            break;
        }
        if (count++ == 0) first = data;
        total += (Py_ssize_t)size;
        pos = data + (Py_ssize_t)size + 2;
    }
    PyObject *pair;
    int mark = 0;
    if (count == 1) {
        mark = end == n ? token_mark(buf + first, total) : 0;
        pair = stamped(t, buf + first, total);
    } else {
        PyObject *joined = PyBytes_FromStringAndSize(NULL, total);
        if (joined != NULL) {
            char *out = PyBytes_AS_STRING(joined);
            for (pos = 0; pos < end;) {
                long long size = whole_chunk_at(pos, n, &data);
                memcpy(out, buf + data, (size_t)size);
                out += size;
                pos = data + (Py_ssize_t)size + 2;
            }
        }
        pair = pair_of(t, joined);
    }
    if (pair == NULL) return -1;
    if (mark && self->elided != NULL && elide_previous(self) < 0) {
        Py_DECREF(pair);
        return -1;
    }
    int failed = PyList_Append(self->pieces, pair);
    Py_DECREF(pair);
    if (failed) return -1;
    Py_ssize_t size_before = PyByteArray_GET_SIZE(self->marks);
    if (mark && self->first_marked < 0) self->first_marked = PyList_GET_SIZE(self->pieces) - 1;
    if (PyByteArray_Resize(self->marks, size_before + 1) < 0) return -1;
    PyByteArray_AS_STRING(self->marks)[size_before] = (char)mark;
    return end == n ? 1 : 2;
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
    Py_ssize_t from = 0;
    if (self->pieces != NULL) {
        int done = whole_chunks(self, t, (Py_ssize_t)n, &from);
        if (done < 0) return NULL;
        if (done == 1) Py_RETURN_NONE;  /* 2: recorded up to `from`, the last chunk handed on */
        if (done == 2 && self->ended != NULL) {
            /* the body is whole: stop recording (what the handler's sink(None, None) does) and say
               when, instead of handing the handler the last chunk's five bytes to parse */
            Py_CLEAR(self->pieces);
            Py_CLEAR(self->marks);
            Py_CLEAR(self->elided);
            PyObject *when = PyLong_FromLongLong(t);
            if (when == NULL) return NULL;
            PyObject *got = PyObject_CallOneArg(self->ended, when);
            Py_DECREF(when);
            return got;
        }
    }
    PyObject *pair = stamped(t, buf + from, (Py_ssize_t)n - from);
    if (pair == NULL) return NULL;
    PyObject *got = PyObject_Call(self->received, pair, NULL);
    Py_DECREF(pair);
    return got;
}

static PyObject *reader_sink(Reader *self, PyObject *args) {
    PyObject *pieces, *marks, *elided = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O:sink", &pieces, &marks, &elided)) return NULL;
    if (pieces == Py_None || marks == Py_None) {
        Py_CLEAR(self->pieces);
        Py_CLEAR(self->marks);
        Py_CLEAR(self->elided);
        Py_RETURN_NONE;
    }
    if (!PyList_Check(pieces) || !PyByteArray_Check(marks) || (elided != Py_None && !PyByteArray_Check(elided))) {
        PyErr_SetString(PyExc_TypeError,
                        "sink(pieces, marks[, elided]): a list and a bytearray (and a bytearray or None), or None, None");
        return NULL;
    }
    Py_XSETREF(self->pieces, Py_NewRef(pieces));
    Py_XSETREF(self->marks, Py_NewRef(marks));
    Py_CLEAR(self->elided);
    if (elided != Py_None) {
        self->elided = Py_NewRef(elided);
        const char *m = PyByteArray_AS_STRING(marks);
        const char *first = memchr(m, 1, (size_t)PyByteArray_GET_SIZE(marks));
        self->first_marked = first == NULL ? -1 : first - m;
    }
    Py_RETURN_NONE;
}

static PyObject *reader_release(Reader *self, PyObject *unused) {
    reader_clear(self);
    Py_RETURN_NONE;
}

static PyMethodDef reader_methods[] = {
    {"sink", (PyCFunction)reader_sink, METH_VARARGS,
     "sink(pieces, marks[, elided]): record whole-chunk reads there (letting marked reads between the first\n"
     "and the last go to their stamps in elided, when given); sink(None, None): hand every read on"},
    {"release", (PyCFunction)reader_release, METH_NOARGS, "drop every reference (the reader is done)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "loadgen.transport._kread.Reader",
    .tp_doc = "Reader(fd, transport, received, plain, failed, eof, closing[, ended]): a connection's kernel-stamped reads",
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


/* ---- The send-time writer: `Sender` ----------------------------------------------------------

A thread of its own writes each posted request to its socket at its due time (CLOCK_MONOTONIC, the
clock of perf_counter_ns) and stamps the send right after the write (and right before it, in case
the response were handled before the stamp): without the GIL, so a send never waits for the event
loop's Python work, and without a trip through the interpreter per send. A post's `Ticket` says what
happened: written whole, partly (the rest is the transport's), failed (errno), or dropped (its
descriptor was retired first). Tickets that need the loop's attention (all but whole writes) are
announced by a byte on the doorbell descriptor the caller gave; `collect()` hands them over (and
lets go of the references of every served post). `retire(fd)` drops the posts of a descriptor about
to be closed; a write in progress finishes first (the lock is held across it), so no write ever
lands on a reused descriptor number. */

typedef struct {
    PyObject_HEAD
    long long sent_ns;   /* CLOCK_MONOTONIC after the write (before it until then) */
    Py_ssize_t written;  /* bytes written */
    int err;             /* errno of a failed write */
    int state;           /* TICKET_* */
    PyObject *owner;     /* the caller's: what to tell when the ticket needs attention */
} Ticket;

enum { TICKET_QUEUED = 0, TICKET_WRITTEN = 1, TICKET_PARTIAL = 2, TICKET_FAILED = 3, TICKET_DROPPED = 4 };
/* how a Sender's thread got its core (prefer_cpu); the names `priority()` returns */
enum { PRIORITY_UNSET = 0, PRIORITY_REALTIME = 1, PRIORITY_SHORT_SLICE = 2, PRIORITY_NONE = 3 };
static const char *const PRIORITY_NAMES[] = {"", "realtime", "short-slice", "none"};

static int ticket_traverse(Ticket *self, visitproc visit, void *arg) {
    Py_VISIT(self->owner);
    return 0;
}

static int ticket_clear(Ticket *self) {
    Py_CLEAR(self->owner);
    return 0;
}

static void ticket_dealloc(Ticket *self) {
    PyObject_GC_UnTrack(self);
    ticket_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ticket_init(Ticket *self, PyObject *args, PyObject *kwds) {
    PyObject *owner = Py_None;
    if (!PyArg_ParseTuple(args, "|O:Ticket", &owner)) return -1;
    Py_XSETREF(self->owner, Py_NewRef(owner));
    return 0;
}

static PyObject *ticket_get_sent_ns(Ticket *self, void *closure) {
    return PyLong_FromLongLong(__atomic_load_n(&self->sent_ns, __ATOMIC_ACQUIRE));
}
static PyObject *ticket_get_written(Ticket *self, void *closure) {
    return PyLong_FromSsize_t(__atomic_load_n(&self->written, __ATOMIC_ACQUIRE));
}
static PyObject *ticket_get_err(Ticket *self, void *closure) {
    return PyLong_FromLong(__atomic_load_n(&self->err, __ATOMIC_ACQUIRE));
}
static PyObject *ticket_get_state(Ticket *self, void *closure) {
    return PyLong_FromLong(__atomic_load_n(&self->state, __ATOMIC_ACQUIRE));
}
static PyObject *ticket_get_owner(Ticket *self, void *closure) { return Py_NewRef(self->owner); }

static PyGetSetDef ticket_getset[] = {
    {"sent_ns", (getter)ticket_get_sent_ns, NULL, "the send stamp (0 until the writer takes the post)", NULL},
    {"written", (getter)ticket_get_written, NULL, "bytes written", NULL},
    {"err", (getter)ticket_get_err, NULL, "errno of a failed write", NULL},
    {"state", (getter)ticket_get_state, NULL, "0 queued, 1 written, 2 partly written, 3 failed, 4 dropped", NULL},
    {"owner", (getter)ticket_get_owner, NULL, "what the poster gave", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TicketType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "loadgen.transport._kread.Ticket",
    .tp_doc = "Ticket(owner=None): what became of one post to a Sender",
    .tp_basicsize = sizeof(Ticket),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ticket_init,
    .tp_dealloc = (destructor)ticket_dealloc,
    .tp_traverse = (traverseproc)ticket_traverse,
    .tp_clear = (inquiry)ticket_clear,
    .tp_getset = ticket_getset,
};

typedef struct {
    long long due;
    unsigned long long seq;
    int fd;
    PyObject *data;  /* bytes: read without the GIL, never changed (a reference held) */
    Ticket *ticket;  /* a reference held */
} Job;

typedef struct {
    Job *jobs;
    Py_ssize_t n, cap;
} Jobs;

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int started, closing, joined, bell;
    Jobs heap;       /* posted, by due time */
    Jobs served;     /* written whole: their references go with the GIL (post, collect) */
    Jobs attention;  /* the others: for collect() */
    unsigned long long seq;
} Sender;

static long long mono_ns(void) { return now_ns(CLOCK_MONOTONIC); }

static int job_before(const Job *a, const Job *b) {
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_up(Job *h, Py_ssize_t i) {
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (!job_before(&h[i], &h[parent])) break;
        Job t = h[i];
        h[i] = h[parent];
        h[parent] = t;
        i = parent;
    }
}

static void heap_down(Job *h, Py_ssize_t n, Py_ssize_t i) {
    for (;;) {
        Py_ssize_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && job_before(&h[l], &h[m])) m = l;
        if (r < n && job_before(&h[r], &h[m])) m = r;
        if (m == i) break;
        Job t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* append (plain realloc: also called without the GIL); -1 when it cannot grow */
static int jobs_push(Jobs *list, Job job) {
    if (list->n == list->cap) {
        Py_ssize_t grown = list->cap ? list->cap * 2 : 64;
        Job *more = realloc(list->jobs, (size_t)grown * sizeof(Job));
        if (more == NULL) return -1;
        list->jobs = more;
        list->cap = grown;
    }
    list->jobs[list->n++] = job;
    return 0;
}

static void ring(Sender *self) {
    if (self->bell >= 0) {
        char one = 1;
        ssize_t ignored = write(self->bell, &one, 1);  /* full: it is ringing already */
        (void)ignored;
    }
}

/* with mu held, no GIL: write one job's request and say how it went on its ticket */
static void serve(Sender *self, Job job) {
    Ticket *t = job.ticket;
    int state, err = 0;
    Py_ssize_t written = 0;
    if (job.fd < 0) {
        state = TICKET_DROPPED;
    } else {
        const char *p = PyBytes_AS_STRING(job.data);
        Py_ssize_t len = PyBytes_GET_SIZE(job.data);
        __atomic_store_n(&t->sent_ns, mono_ns(), __ATOMIC_RELEASE);
        ssize_t w = send(job.fd, p, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL);
        long long after = mono_ns();
        if (w < 0) err = errno;
        if (w == len) {
            state = TICKET_WRITTEN;
            written = len;
        } else if (w >= 0 || err == EAGAIN || err == EWOULDBLOCK) {
            state = TICKET_PARTIAL;  /* the socket buffer is full: the rest is the transport's */
            written = w > 0 ? w : 0;
            err = 0;
        } else {
            state = TICKET_FAILED;
        }
        __atomic_store_n(&t->sent_ns, after, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&t->written, written, __ATOMIC_RELEASE);
    __atomic_store_n(&t->err, err, __ATOMIC_RELEASE);
    __atomic_store_n(&t->state, state, __ATOMIC_RELEASE);
    if (state == TICKET_WRITTEN) {
        jobs_push(&self->served, job);  /* out of memory: its references are kept, not freed here */
    } else {
        jobs_push(&self->attention, job);
        ring(self);
    }
}

/* struct sched_attr as the kernel reads it (include/uapi/linux/sched/types.h, SCHED_ATTR_SIZE_VER0);
glibc before 2.41 has no wrapper for sched_getattr / sched_setattr */
typedef struct {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
} SchedAttr;

#define SHORT_SLICE_NS 100000ULL       /* the shortest slice EEVDF grants (it clamps to 0.1-100 ms) */
#define SCHED_RESET_ON_FORK_FLAG 0x01  /* SCHED_FLAG_RESET_ON_FORK: kept, dropping it needs privileges */

static int sender_priority = PRIORITY_UNSET;  /* how the writer thread got the core (`priority()`) */
static long long sender_slack = -1;  /* the writer thread's timer slack once it has its core, ns (`timer_slack()`) */

/* The calling thread's timed waits end at their deadline instead of up to its timer slack later (the
kernel may defer a SCHED_OTHER thread's timer by it to batch wake-ups: 50 µs unless set; PR_SET_TIMERSLACK
is per thread and needs no privilege). 0 where it was set. */
static int precise_timers(void) {
#ifdef PR_SET_TIMERSLACK
    return prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#else
    errno = ENOSYS;  /* no timer slack to set (not Linux) */
    return -1;
#endif
}

/* The calling thread's timer slack, ns (-1 where there is none to read). */
static long long current_slack(void) {
#ifdef PR_GET_TIMERSLACK
    return (long long)prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
#else
    return -1;
#endif
}

/* Let the writer thread preempt the busy event-loop thread the moment a send is due, where the two
share a core (a run pinned to one): real-time priority where permitted (root, CAP_SYS_NICE); else, on
Linux 6.12 and later, EEVDF's shortest slice (sched_attr.sched_runtime of a SCHED_OTHER thread, which
needs no privilege and keeps the thread's nice): a waking thread with a shorter slice preempts the
running one (PREEMPT_SHORT) instead of waiting for the end of its ~3 ms slice. Older kernels ignore
the field (the call succeeds and changes nothing). The thread only sleeps and writes.
Its timed waits would also end up to the thread's timer slack late (50 µs by default; a real-time thread
has none on recent kernels, older ones kept it for futex waits): `precise_timers` takes it to 1 ns. */
static int prefer_cpu(void) {
    struct sched_param param = {.sched_priority = 1};
    precise_timers();
    if (sched_setscheduler(0, SCHED_FIFO, &param) == 0) return PRIORITY_REALTIME;
#if defined(SYS_sched_getattr) && defined(SYS_sched_setattr)
    SchedAttr attr;
    memset(&attr, 0, sizeof attr);
    if (syscall(SYS_sched_getattr, 0, &attr, (unsigned int)sizeof attr, 0) == 0 &&
        attr.sched_policy == SCHED_OTHER) {
        attr.size = (uint32_t)sizeof attr;
        attr.sched_flags &= SCHED_RESET_ON_FORK_FLAG;
        attr.sched_runtime = SHORT_SLICE_NS;
        if (syscall(SYS_sched_setattr, 0, &attr, 0) == 0) return PRIORITY_SHORT_SLICE;
    }
#endif
    return PRIORITY_NONE;
}

static void *sender_main(void *arg) {
    Sender *self = arg;
    int how = prefer_cpu();
    /* the slack first: a reader that sees the priority set (it waits for that) sees the slack too */
    __atomic_store_n(&sender_slack, current_slack(), __ATOMIC_RELEASE);
    __atomic_store_n(&sender_priority, how, __ATOMIC_RELEASE);
    pthread_mutex_lock(&self->mu);
    for (;;) {
        if (self->heap.n == 0) {
            if (self->closing) break;
            pthread_cond_wait(&self->cv, &self->mu);
            continue;
        }
        long long due = self->heap.jobs[0].due;
        if (due > mono_ns()) {
            struct timespec until = {(time_t)(due / 1000000000LL), (long)(due % 1000000000LL)};
            pthread_cond_timedwait(&self->cv, &self->mu, &until);
            continue;
        }
        Job job = self->heap.jobs[0];
        self->heap.jobs[0] = self->heap.jobs[--self->heap.n];
        heap_down(self->heap.jobs, self->heap.n, 0);
        serve(self, job);  /* with the lock held: `retire` waits for a write in progress */
    }
    pthread_mutex_unlock(&self->mu);
    return NULL;
}

static int sender_init(Sender *self, PyObject *args, PyObject *kwds) {
    int bell = -1;
    if (!PyArg_ParseTuple(args, "|i:Sender", &bell)) return -1;
    if (self->started) {
        PyErr_SetString(PyExc_RuntimeError, "Sender already started");
        return -1;
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cv, &attr);
    pthread_condattr_destroy(&attr);
    self->bell = bell;
    int failed = pthread_create(&self->thread, NULL, sender_main, self);
    if (failed) {
        pthread_cond_destroy(&self->cv);
        pthread_mutex_destroy(&self->mu);
        errno = failed;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    self->started = 1;
    return 0;
}

/* take a list over from under the lock */
static Jobs take(Sender *self, Jobs *list) {
    pthread_mutex_lock(&self->mu);
    Jobs got = *list;
    list->jobs = NULL;
    list->n = list->cap = 0;
    pthread_mutex_unlock(&self->mu);
    return got;
}

static void release(Jobs got) {
    for (Py_ssize_t i = 0; i < got.n; i++) {
        Py_DECREF(got.jobs[i].data);
        Py_DECREF(got.jobs[i].ticket);
    }
    free(got.jobs);
}

static PyObject *sender_post(Sender *self, PyObject *args) {
    long long due;
    int fd;
    PyObject *data;
    Ticket *ticket;
    if (!PyArg_ParseTuple(args, "LiO!O!:post", &due, &fd, &PyBytes_Type, &data, &TicketType, &ticket)) return NULL;
    if (!self->started || self->closing) {
        PyErr_SetString(PyExc_RuntimeError, "the Sender is closed");
        return NULL;
    }
    if (fd < 0) {
        PyErr_SetString(PyExc_ValueError, "post: a descriptor >= 0");
        return NULL;
    }
    __atomic_store_n(&ticket->state, TICKET_QUEUED, __ATOMIC_RELEASE);
    __atomic_store_n(&ticket->sent_ns, 0, __ATOMIC_RELEASE);
    Job job = {due, 0, fd, Py_NewRef(data), (Ticket *)Py_NewRef((PyObject *)ticket)};
    pthread_mutex_lock(&self->mu);
    job.seq = self->seq++;
    if (jobs_push(&self->heap, job) < 0) {
        pthread_mutex_unlock(&self->mu);
        Py_DECREF(job.data);
        Py_DECREF(job.ticket);
        return PyErr_NoMemory();
    }
    heap_up(self->heap.jobs, self->heap.n - 1);
    if (self->heap.jobs[0].seq == job.seq) pthread_cond_signal(&self->cv);  /* due before what it sleeps for */
    Py_ssize_t served = self->served.n;
    pthread_mutex_unlock(&self->mu);
    if (served >= 256) release(take(self, &self->served));  /* now and then, with the GIL */
    Py_RETURN_NONE;
}

static PyObject *sender_collect(Sender *self, PyObject *unused) {
    release(take(self, &self->served));
    Jobs got = take(self, &self->attention);
    PyObject *out = PyList_New(got.n);
    for (Py_ssize_t i = 0; out != NULL && i < got.n; i++)
        PyList_SET_ITEM(out, i, Py_NewRef((PyObject *)got.jobs[i].ticket));
    release(got);
    return out;
}

static PyObject *sender_retire(Sender *self, PyObject *args) {
    int fd;
    if (!PyArg_ParseTuple(args, "i:retire", &fd)) return NULL;
    if (!self->started) Py_RETURN_NONE;
    pthread_mutex_lock(&self->mu);  /* the writer holds it across one write at most, and never the GIL */
    for (Py_ssize_t i = 0; i < self->heap.n; i++)
        if (self->heap.jobs[i].fd == fd) self->heap.jobs[i].fd = -1;
    pthread_mutex_unlock(&self->mu);
    Py_RETURN_NONE;
}

/* stop the thread once what was posted is served; the GIL released while it finishes */
static void stop_thread(Sender *self) {
    if (!self->started || self->joined) return;
    pthread_mutex_lock(&self->mu);
    self->closing = 1;
    pthread_cond_signal(&self->cv);
    pthread_mutex_unlock(&self->mu);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    self->joined = 1;
}

static PyObject *sender_close(Sender *self, PyObject *unused) {
    stop_thread(self);
    Py_RETURN_NONE;
}

static PyObject *sender_pending(Sender *self, PyObject *unused) {
    pthread_mutex_lock(&self->mu);
    Py_ssize_t n = self->heap.n;
    pthread_mutex_unlock(&self->mu);
    return PyLong_FromSsize_t(n);
}

static void sender_dealloc(Sender *self) {
    if (self->started) {
        stop_thread(self);
        release(self->served);
        release(self->attention);
        release(self->heap);  /* none left: the thread served them all */
        pthread_cond_destroy(&self->cv);
        pthread_mutex_destroy(&self->mu);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef sender_methods[] = {
    {"post", (PyCFunction)sender_post, METH_VARARGS,
     "post(due_ns, fd, data, ticket): write data to fd at due_ns (CLOCK_MONOTONIC); the ticket says how it went"},
    {"collect", (PyCFunction)sender_collect, METH_NOARGS,
     "collect(): the tickets not written whole since the last call (and let go of the served posts)"},
    {"retire", (PyCFunction)sender_retire, METH_VARARGS,
     "retire(fd): drop the posts to fd (call before closing it; a write in progress finishes first)"},
    {"pending", (PyCFunction)sender_pending, METH_NOARGS, "how many posts are not served yet"},
    {"close", (PyCFunction)sender_close, METH_NOARGS, "stop the thread once every post is served"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "loadgen.transport._kread.Sender",
    .tp_doc = "Sender(bell_fd=-1): writes posted requests at their due times from a thread of its own",
    .tp_basicsize = sizeof(Sender),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)sender_init,
    .tp_dealloc = (destructor)sender_dealloc,
    .tp_methods = sender_methods,
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

static PyObject *priority(PyObject *module, PyObject *unused) {
    return PyUnicode_FromString(PRIORITY_NAMES[__atomic_load_n(&sender_priority, __ATOMIC_ACQUIRE)]);
}

static PyObject *timer_slack(PyObject *module, PyObject *unused) {
    return PyLong_FromLongLong(__atomic_load_n(&sender_slack, __ATOMIC_ACQUIRE));
}

/* rawhttp._Conn._head's parse of a whole response head, for the usual head: `head(buf)` with buf the
   bytes read so far returns (status, HTTP/1.0 or not, fields, the body bytes after the head), fields the
   `connection`, `transfer-encoding` and `content-length` header values the head's dict comprehension keeps
   (the key and value stripped of str.strip's ASCII whitespace and lowercased; the last of a repeated
   name). None for anything else (no blank line yet, a byte past ASCII, a status line _head rejects or
   that int() might read otherwise): _head then parses in Python, as before. */
static int head_space(unsigned char c) { return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f); }

static PyObject *head_field(const char *p, Py_ssize_t n) {
    char low[64];
    if (n > (Py_ssize_t)sizeof low) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) low[i] = (char)((p[i] >= 'A' && p[i] <= 'Z') ? p[i] + 32 : p[i]);
    static const char *const names[] = {"connection", "transfer-encoding", "content-length"};
    for (int k = 0; k < 3; k++)
        if ((Py_ssize_t)strlen(names[k]) == n && memcmp(low, names[k], (size_t)n) == 0) return PyUnicode_FromString(names[k]);
    return NULL;
}

static PyObject *head(PyObject *module, PyObject *arg) {
    (void)module;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "head(bytes)");
        return NULL;
    }
    const char *p = PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    const char *blank = memmem(p, (size_t)n, "\r\n\r\n", 4);
    if (blank == NULL) Py_RETURN_NONE;
    Py_ssize_t cut = blank - p;
    for (Py_ssize_t i = 0; i < cut; i++)
        if ((unsigned char)p[i] >= 0x80) Py_RETURN_NONE;
    const char *eol = memmem(p, (size_t)cut, "\r\n", 2);
    Py_ssize_t line_end = eol == NULL ? cut : eol - p;
    const char *sp1 = memchr(p, ' ', (size_t)line_end);
    if (sp1 == NULL || sp1 - p < 7 || memcmp(p, "HTTP/1.", 7) != 0) Py_RETURN_NONE;
    const char *code = sp1 + 1, *line = p + line_end;
    const char *sp2 = memchr(code, ' ', (size_t)(line - code));
    const char *code_end = sp2 == NULL ? line : sp2;
    if (code_end == code || code_end - code > 9) Py_RETURN_NONE;
    long status = 0;
    for (const char *c = code; c < code_end; c++) {
        if (*c < '0' || *c > '9') Py_RETURN_NONE;
        status = status * 10 + (*c - '0');
    }
    int http10 = sp1 - p == 8 && memcmp(p, "HTTP/1.0", 8) == 0;
    PyObject *fields = PyDict_New();
    if (fields == NULL) return NULL;
    Py_ssize_t pos = line_end + 2;
    while (pos <= cut && line_end < cut) {
        const char *start = p + pos;
        const char *next = memmem(start, (size_t)(cut - pos), "\r\n", 2);
        Py_ssize_t len = next == NULL ? cut - pos : next - start;
        const char *colon = memchr(start, ':', (size_t)len);
        const char *k = start, *k_end = colon == NULL ? start + len : colon;
        while (k < k_end && head_space((unsigned char)*k)) k++;
        while (k_end > k && head_space((unsigned char)k_end[-1])) k_end--;
        PyObject *key = head_field(k, k_end - k);
        if (key != NULL) {
            const char *v = colon == NULL ? start + len : colon + 1, *v_end = start + len;
            while (v < v_end && head_space((unsigned char)*v)) v++;
            while (v_end > v && head_space((unsigned char)v_end[-1])) v_end--;
            PyObject *value = PyUnicode_New(v_end - v, 127);
            if (value != NULL) {
                char *o = (char *)PyUnicode_1BYTE_DATA(value);
                for (const char *c = v; c < v_end; c++) *o++ = (char)((*c >= 'A' && *c <= 'Z') ? *c + 32 : *c);
            }
            int failed = value == NULL || PyDict_SetItem(fields, key, value) < 0;
            Py_DECREF(key);
            Py_XDECREF(value);
            if (failed) {
                Py_DECREF(fields);
                return NULL;
            }
        } else if (PyErr_Occurred()) {
            Py_DECREF(fields);
            return NULL;
        }
        if (next == NULL) break;
        pos += len + 2;
    }
    return Py_BuildValue("(lON" "y#)", status, http10 ? Py_True : Py_False, fields, blank + 4, n - cut - 4);
}

static PyObject *py_precise_timers(PyObject *module, PyObject *unused) {
    if (precise_timers() != 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"precise_timers", py_precise_timers, METH_NOARGS,
     "precise_timers(): the calling thread's timed waits end at their deadline (timer slack 1 ns)"},
    {"head", head, METH_O, "head(buf): (status, http/1.0, fields, body) of a whole usual response head, or None"},
    {"timer_slack", timer_slack, METH_NOARGS,
     "timer_slack(): the writer thread's timer slack (ns) once it got its core, set with priority(); -1 before"},
    {"priority", priority, METH_NOARGS,
     "how the last Sender's thread got the core: 'realtime', 'short-slice', 'none' ('' before one ran)"},
    {"set_token", set_token, METH_O, "set_token(marker): what marks a read as one compact token event"},
    {"offset", offset, METH_NOARGS, "(the kernel stamp the offset was last taken for, the offset), ns"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kread", "Kernel-stamped reads for the raw client, in C.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__kread(void) {
    if (PyType_Ready(&ReaderType) < 0 || PyType_Ready(&TicketType) < 0 || PyType_Ready(&SenderType) < 0)
        return NULL;
    str_is_closing = PyUnicode_InternFromString("is_closing");
    if (str_is_closing == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0 ||
        PyModule_AddObjectRef(m, "Ticket", (PyObject *)&TicketType) < 0 ||
        PyModule_AddObjectRef(m, "Sender", (PyObject *)&SenderType) < 0 ||
        PyModule_AddIntConstant(m, "TICKET_PARTIAL", TICKET_PARTIAL) < 0 ||
        PyModule_AddIntConstant(m, "TICKET_FAILED", TICKET_FAILED) < 0 ||
        PyModule_AddIntConstant(m, "TICKET_DROPPED", TICKET_DROPPED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
