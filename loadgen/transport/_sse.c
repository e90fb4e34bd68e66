/* The finished-stream parse of the raw client's usual stream, in C (loadgen.transport.sse._parse_marked).

`marked(reads, marks)` does what `sse._parse_marked` does before its JSON decode, for the streams it
takes: reads recorded as `(t, bytes)` pieces with a mark per read (1: the read is exactly one compact
token event, `stamping.ChunkedBody`'s mark), every other read one or more one-line `data: ` events
with LF framing. It returns `(token_ns, done, items)`: the token times, whether the stream ended with
`data: [DONE]`, and the events to decode as `(t, event bytes, token-bearing)` in the order
`_absorb_decoded` takes them (the first and last token event, every other event that is not a token
event). It returns None for anything else, and for a stream the Python parse would reject: the caller
then runs the Python parse, which returns or raises as before. So the result is the Python parse's by
construction where this one answers, and tested against it where it does. Where this module is not
built, sse.py parses in Python. */

#define _GNU_SOURCE  /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

static const char TOKEN[] = "\"choices\":[{";  /* sse.COMPACT_TOKEN */
static const char DONE[] = "data: [DONE]";     /* sse._DONE */

/* sse._TOKEN_BEARING, rb'"choices"\s*:\s*\[\s*[^\]\s]', searched in p[0:n]. */
static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int token_bearing(const char *p, Py_ssize_t n) {
    static const char key[] = "\"choices\"";
    const Py_ssize_t klen = (Py_ssize_t)sizeof key - 1;
    for (Py_ssize_t i = 0; i + klen <= n; i++) {
        if (p[i] != '"' || memcmp(p + i, key, (size_t)klen) != 0) continue;
        Py_ssize_t j = i + klen;
        while (j < n && is_space(p[j])) j++;
        if (j >= n || p[j] != ':') continue;
        j++;
        while (j < n && is_space(p[j])) j++;
        if (j >= n || p[j] != '[') continue;
        j++;
        while (j < n && is_space(p[j])) j++;
        if (j < n && p[j] != ']') return 1;
    }
    return 0;
}

/* One event of an unmarked read: its bytes (`data: ...`, no terminator), its read's time object. */
typedef struct {
    const char *p;
    Py_ssize_t n;
    PyObject *t; /* borrowed from the read's tuple */
    int token;
} Event;

/* The events of one unmarked read's data, each `data: ` + a line + `\n\n`, appended to ev; -1 when
   the read is not that (sse.fast_events would return None, or the read does not end at an event's
   end). */
static int read_events(const char *p, Py_ssize_t n, PyObject *t, Event **ev, Py_ssize_t *count,
                       Py_ssize_t *cap) {
    Py_ssize_t pos = 0;
    if (n < 2 || p[n - 1] != '\n' || p[n - 2] != '\n') return -1;
    while (pos < n) {
        if (n - pos < 6 || memcmp(p + pos, "data: ", 6) != 0) return -1;
        const char *nl = memchr(p + pos, '\n', (size_t)(n - pos));
        if (nl == NULL) return -1;
        Py_ssize_t end = nl - p;
        if (end + 1 >= n || p[end + 1] != '\n') return -1;
        if (memchr(p + pos, '\r', (size_t)(end - pos)) != NULL) return -1;
        if (*count == *cap) {
            Py_ssize_t grown = *cap ? *cap * 2 : 8;
            Event *more = PyMem_Realloc(*ev, (size_t)grown * sizeof(Event));
            if (more == NULL) return -2;
            *ev = more;
            *cap = grown;
        }
        (*ev)[*count] = (Event){p + pos, end - pos, t, 0};
        (*count)++;
        pos = end + 2;
    }
    return 0;
}

/* (t, i, seq, event bytes, token): sorted like Python's tuples of the same values. */
static PyObject *entry(PyObject *t, Py_ssize_t i, Py_ssize_t seq, const char *p, Py_ssize_t n, int token) {
    return Py_BuildValue("(OnnNO)", t, i, seq, PyBytes_FromStringAndSize(p, n), token ? Py_True : Py_False);
}

static PyObject *marked(PyObject *module, PyObject *args) {
    PyObject *reads, *marks;
    if (!PyArg_ParseTuple(args, "O!O!:marked", &PyList_Type, &reads, &PyByteArray_Type, &marks)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(reads);
    if (PyByteArray_GET_SIZE(marks) != n || n == 0) Py_RETURN_NONE;
    const char *mark = PyByteArray_AS_STRING(marks);
    Py_ssize_t first_i = -1, last_i = -1, n_marked = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *read = PyList_GET_ITEM(reads, r);
        if (!PyTuple_CheckExact(read) || PyTuple_GET_SIZE(read) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(read, 0)) ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(read, 1)))
            Py_RETURN_NONE;
        if (mark[r] == 1) {
            if (first_i < 0) first_i = r;
            last_i = r;
            n_marked++;
        } else if (mark[r] != 0) {
            Py_RETURN_NONE;
        }
    }
    if (first_i < 0) Py_RETURN_NONE;

    Event *ev = NULL;
    Py_ssize_t count = 0, cap = 0;
    PyObject *token_ns = NULL, *ends = NULL, *items = NULL, *result = NULL;
    for (Py_ssize_t r = 0; r < n; r++) {
        if (mark[r]) continue;
        PyObject *read = PyList_GET_ITEM(reads, r);
        PyObject *data = PyTuple_GET_ITEM(read, 1);
        int got = read_events(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), PyTuple_GET_ITEM(read, 0), &ev,
                              &count, &cap);
        if (got == -2) {
            PyErr_NoMemory();
            goto done;
        }
        if (got < 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    /* _strip_done: one `data: [DONE]`, the stream's last event, and no marked read after it */
    const Py_ssize_t done_len = (Py_ssize_t)sizeof DONE - 1;
    Py_ssize_t dones = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        dones += ev[i].n == done_len && memcmp(ev[i].p, DONE, (size_t)done_len) == 0;
    int ended = dones > 0;
    if (ended) {
        Event *tail = &ev[count - 1];
        int tail_done = tail->n == done_len && memcmp(tail->p, DONE, (size_t)done_len) == 0;
        if (dones > 1 || !tail_done || mark[n - 1] != 0) {  /* Python raises "data after [DONE]" */
            result = Py_NewRef(Py_None);
            goto done;
        }
        count--;
    }
    /* _token_marks, and its framing check (a token event must look like a JSON object) */
    Py_ssize_t tokens = 0, tok_first = -1, tok_last = -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        int token = memmem(ev[i].p, (size_t)ev[i].n, TOKEN, sizeof TOKEN - 1) != NULL ||
                    token_bearing(ev[i].p, ev[i].n);
        ev[i].token = token;
        if (!token) continue;
        if (ev[i].n < 7 || memcmp(ev[i].p, "data: {", 7) != 0 || ev[i].p[ev[i].n - 1] != '}') {
            result = Py_NewRef(Py_None);  /* Python raises "invalid JSON in SSE data" */
            goto done;
        }
        if (tok_first < 0) tok_first = i;
        tok_last = i;
        tokens++;
    }

    token_ns = PyList_New(0);
    ends = PyList_New(0);
    items = PyList_New(0);
    if (token_ns == NULL || ends == NULL || items == NULL) goto done;
    for (Py_ssize_t r = 0; r < n; r++) {
        if (mark[r] && PyList_Append(token_ns, PyTuple_GET_ITEM(PyList_GET_ITEM(reads, r), 0)) < 0) goto done;
    }
    PyObject *first = PyList_GET_ITEM(reads, first_i), *last = PyList_GET_ITEM(reads, last_i);
    PyObject *fdata = PyTuple_GET_ITEM(first, 1), *ldata = PyTuple_GET_ITEM(last, 1);
    PyObject *pair[4] = {
        entry(PyTuple_GET_ITEM(first, 0), 0, 0, PyBytes_AS_STRING(fdata), PyBytes_GET_SIZE(fdata) - 2, 1),
        entry(PyTuple_GET_ITEM(last, 0), 0, 0, PyBytes_AS_STRING(ldata), PyBytes_GET_SIZE(ldata) - 2, 1),
        NULL,
        NULL,
    };
    Py_ssize_t n_ends = 2;
    if (tokens) {
        pair[2] = entry(ev[tok_first].t, tok_first, 0, ev[tok_first].p, ev[tok_first].n, 1);
        pair[3] = entry(ev[tok_last].t, tok_last, 0, ev[tok_last].p, ev[tok_last].n, 1);
        n_ends = 4;
    }
    for (Py_ssize_t e = 0; e < n_ends; e++) {
        if (pair[e] == NULL || PyList_Append(ends, pair[e]) < 0) {
            for (Py_ssize_t k = 0; k < n_ends; k++) Py_XDECREF(pair[k]);
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < n_ends; k++) Py_DECREF(pair[k]);
    if (tokens) {
        /* as Python: ends sorted as whole tuples, the token times of both kinds sorted together */
        if (PyList_Sort(ends) < 0) goto done;
        for (Py_ssize_t i = 0; i < count; i++) {
            if (ev[i].token && PyList_Append(token_ns, ev[i].t) < 0) goto done;
        }
        if (PyList_Sort(token_ns) < 0) goto done;
    }
    /* items: the other reads' non-token events, then the first and last token event; sorted by
       (t, order within a read), ties kept in that order (seq: Python's stable sort by that key) */
    Py_ssize_t seq = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (ev[i].token) continue;
        PyObject *one = entry(ev[i].t, i, seq++, ev[i].p, ev[i].n, 0);
        if (one == NULL || PyList_Append(items, one) < 0) {
            Py_XDECREF(one);
            goto done;
        }
        Py_DECREF(one);
    }
    PyObject *lo = PyList_GET_ITEM(ends, 0), *hi = PyList_GET_ITEM(ends, PyList_GET_SIZE(ends) - 1);
    int same = PyObject_RichCompareBool(lo, hi, Py_EQ);
    if (same < 0) goto done;
    PyObject *picked[2] = {lo, hi};
    for (int e = 0; e < (same ? 1 : 2); e++) {
        PyObject *src = picked[e];
        PyObject *one = Py_BuildValue("(OOnOO)", PyTuple_GET_ITEM(src, 0), PyTuple_GET_ITEM(src, 1), seq++,
                                      PyTuple_GET_ITEM(src, 3), PyTuple_GET_ITEM(src, 4));
        if (one == NULL || PyList_Append(items, one) < 0) {
            Py_XDECREF(one);
            goto done;
        }
        Py_DECREF(one);
    }
    if (PyList_Sort(items) < 0) goto done;
    Py_ssize_t n_items = PyList_GET_SIZE(items);
    PyObject *out = PyList_New(n_items);
    if (out == NULL) goto done;
    for (Py_ssize_t k = 0; k < n_items; k++) {
        PyObject *src = PyList_GET_ITEM(items, k);
        PyObject *one = PyTuple_Pack(3, PyTuple_GET_ITEM(src, 0), PyTuple_GET_ITEM(src, 3), PyTuple_GET_ITEM(src, 4));
        if (one == NULL) {
            Py_DECREF(out);
            goto done;
        }
        PyList_SET_ITEM(out, k, one);
    }
    result = Py_BuildValue("(ONN)", token_ns, ended ? Py_NewRef(Py_True) : Py_NewRef(Py_False), out);

done:
    PyMem_Free(ev);
    Py_XDECREF(token_ns);
    Py_XDECREF(ends);
    Py_XDECREF(items);
    return result;
}

static PyMethodDef module_methods[] = {
    {"marked", marked, METH_VARARGS,
     "marked(reads, marks): (token_ns, done, items) of a marked stream as sse._parse_marked reads it, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sse", "The raw client's finished-stream parse, in C.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__sse(void) { return PyModule_Create(&module); }
