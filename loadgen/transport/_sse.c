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

/* reads: (t, bytes) pairs, or None for a marked read whose stamp is the next of `elided` (native int64s;
   chunked.Reads.elided; NULL: none elided). */
static PyObject *marked_reads(PyObject *reads, PyObject *marks, PyObject *elided) {
    Py_ssize_t n = PyList_GET_SIZE(reads);
    if (PyByteArray_GET_SIZE(marks) != n || n == 0) Py_RETURN_NONE;
    const char *mark = PyByteArray_AS_STRING(marks);
    Py_ssize_t first_i = -1, last_i = -1, n_marked = 0, n_elided = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *read = PyList_GET_ITEM(reads, r);
        if (read == Py_None && elided != NULL && mark[r] == 1) {
            if (first_i < 0) first_i = r;  /* never elided by the reader: declined below */
            n_elided++;
            n_marked++;
            last_i = r;
            continue;
        }
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
    /* the stamps of the elided reads, and the first and last marked reads whole */
    if (n_elided && (PyByteArray_GET_SIZE(elided) != 8 * n_elided || PyList_GET_ITEM(reads, first_i) == Py_None ||
                     PyList_GET_ITEM(reads, last_i) == Py_None))
        Py_RETURN_NONE;
    const char *stamps = n_elided ? PyByteArray_AS_STRING(elided) : NULL;

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
    for (Py_ssize_t r = 0, k = 0; r < n; r++) {
        if (!mark[r]) continue;
        PyObject *read = PyList_GET_ITEM(reads, r);
        if (read != Py_None) {
            if (PyList_Append(token_ns, PyTuple_GET_ITEM(read, 0)) < 0) goto done;
            continue;
        }
        long long stamp;
        memcpy(&stamp, stamps + 8 * k++, 8);
        PyObject *t = PyLong_FromLongLong(stamp);
        if (t == NULL || PyList_Append(token_ns, t) < 0) {
            Py_XDECREF(t);
            goto done;
        }
        Py_DECREF(t);
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

/* Ask for the cache lines of the reads' tuples, then of their stamps and bytes, before they are read:
   a finished stream's reads were made over its whole life and sit apart in memory, so walking them one
   by one waits for each line in turn (~13 µs for 32 reads in a run, against ~1 µs when they are
   cached); asked for together, the waits overlap. */
static void prefetch_reads(PyObject *reads) {
    Py_ssize_t n = PyList_GET_SIZE(reads);
    PyObject **items = ((PyListObject *)reads)->ob_item;
    for (Py_ssize_t r = 0; r < n; r++) __builtin_prefetch(items[r]);
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *read = items[r];
        if (!PyTuple_CheckExact(read) || PyTuple_GET_SIZE(read) != 2) continue;
        __builtin_prefetch(PyTuple_GET_ITEM(read, 0));
        __builtin_prefetch(PyTuple_GET_ITEM(read, 1));
    }
}

/* held(reads, overhead): backlog.held_bytes, the payload bytes of the (t, bytes) reads plus `overhead` a
   read; None for anything but a list of such pairs. */
static PyObject *held(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "held(reads, overhead): a list and an int");
        return NULL;
    }
    Py_ssize_t overhead = PyLong_AsSsize_t(args[1]);
    if (overhead == -1 && PyErr_Occurred()) return NULL;
    PyObject *reads = args[0];
    prefetch_reads(reads);
    Py_ssize_t n = PyList_GET_SIZE(reads), total = 0;
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *read = PyList_GET_ITEM(reads, r);
        if (read == Py_None) {  /* an elided read: its 8-byte stamp */
            total += 8;
            continue;
        }
        if (!PyTuple_CheckExact(read) || PyTuple_GET_SIZE(read) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(read, 1)))
            Py_RETURN_NONE;
        total += PyBytes_GET_SIZE(PyTuple_GET_ITEM(read, 1)) + overhead;
    }
    return PyLong_FromSsize_t(total);
}

static PyObject *marked(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *reads, *marks;
    if (!PyArg_ParseTuple(args, "O!O!:marked", &PyList_Type, &reads, &PyByteArray_Type, &marks)) return NULL;
    return marked_reads(reads, marks, NULL);
}

/* finish(record): finish.finalize of the usual record in C. */
/* names and values (usage fields and record attributes share the words prompt_tokens, cached_tokens; the
   usage key is also the token_count value "usage") */
enum { S_OUTCOME, S_FALLBACK, S_STATUS, S_RAW, S_MARKS, S_CHOICES, S_ERROR, S_USAGE, S_COMPLETION, S_PROMPT,
       S_DETAILS, S_CACHED, S_TOKEN_NS, S_FIRST, S_LAST, S_OUTPUT_TOKENS, S_TOKEN_COUNT, S_OK, S_PROTOCOL_ERROR,
       S_NO_DONE, S_ESTIMATED, S_Q, S_ELIDED, S_COUNT };
static const char *const WORDS[S_COUNT] = {
    "outcome", "fallback", "http_status", "raw", "marks", "choices", "error", "usage", "completion_tokens",
    "prompt_tokens", "prompt_tokens_details", "cached_tokens", "token_ns", "first_ns", "last_ns",
    "output_tokens", "token_count", "ok", "protocol_error", "stream ended before data: [DONE]", "estimated",
    "q", "elided",
};
static PyObject *words[S_COUNT];
static PyObject *json_loads, *array_type; /* orjson.loads, array.array: imported at the first finish */

/* A run of 19 digits: an integer orjson may read otherwise than json (sse._decode_all declines it). */
static int long_digits(const char *p, Py_ssize_t n) {
    int run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        run = (p[i] >= '0' && p[i] <= '9') ? run + 1 : 0;
        if (run >= 19) return 1;
    }
    return 0;
}

/* d[key] when present and not None (borrowed), NULL otherwise; -1 into *err on an error. */
static PyObject *field(PyObject *d, PyObject *key, int *err) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred()) *err = -1;
    return v == Py_None ? NULL : v;
}

/* What the decoded events say, as sse._absorb reads them with count_token False; 0: absorbed, 1: a value
   this parse does not take (the Python parse answers or raises), -1: an error. The values are borrowed
   from the decoded objects. */
typedef struct {
    PyObject *prompt, *completion, *cached;
} Usage;

static int absorb(PyObject *objs, PyObject *items, Usage *u) {
    Py_ssize_t n = PyList_GET_SIZE(items);
    if (!PyList_CheckExact(objs) || PyList_GET_SIZE(objs) != n) return 1;
    int err = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *obj = PyList_GET_ITEM(objs, k);
        int token = PyTuple_GET_ITEM(PyList_GET_ITEM(items, k), 2) == Py_True;
        if (!PyDict_CheckExact(obj)) return 1;
        PyObject *choices = field(obj, words[S_CHOICES], &err);
        if (err) return -1;
        int bearing = choices != NULL && PyObject_IsTrue(choices);
        if (bearing != token) return 1;  /* Python raises "unexpected `choices`" */
        if (bearing) {
            if (!PyList_CheckExact(choices)) return 1;
            for (Py_ssize_t c = 0; c < PyList_GET_SIZE(choices); c++)
                if (!PyDict_CheckExact(PyList_GET_ITEM(choices, c))) return 1;
        } else {
            int has_error = PyDict_Contains(obj, words[S_ERROR]);
            if (has_error) return has_error < 0 ? -1 : 1;  /* an error event: the Python parse words it */
        }
        PyObject *usage = field(obj, words[S_USAGE], &err);
        if (err) return -1;
        if (usage == NULL || !PyObject_IsTrue(usage)) continue;
        if (!PyDict_CheckExact(usage)) return 1;
        PyObject *v = field(usage, words[S_COMPLETION], &err);
        if (v != NULL && !PyLong_CheckExact(v)) return 1;  /* int() of another type: Python's */
        if (v != NULL) u->completion = v;
        v = field(usage, words[S_PROMPT], &err);
        if (v != NULL && !PyLong_CheckExact(v)) return 1;
        if (v != NULL) u->prompt = v;
        PyObject *details = field(usage, words[S_DETAILS], &err);
        if (err) return -1;
        if (details != NULL && PyDict_CheckExact(details)) {
            v = field(details, words[S_CACHED], &err);
            if (v != NULL && !PyLong_CheckExact(v)) return 1;
            if (v != NULL) u->cached = v;
        }
        if (err) return -1;
    }
    return 0;
}

/* The JSON values of the items' events, decoded in one orjson.loads as sse._decode_all does; Py_None when
   it would not decode them with orjson (the Python parse then does), NULL on an error. */
static PyObject *decode(PyObject *items) {
    Py_ssize_t n = PyList_GET_SIZE(items), size = 2;
    for (Py_ssize_t k = 0; k < n; k++) size += PyBytes_GET_SIZE(PyTuple_GET_ITEM(PyList_GET_ITEM(items, k), 1)) - 6 + 1;
    PyObject *joined = PyBytes_FromStringAndSize(NULL, size);
    if (joined == NULL) return NULL;
    char *o = PyBytes_AS_STRING(joined);
    *o++ = '[';
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *e = PyTuple_GET_ITEM(PyList_GET_ITEM(items, k), 1);
        if (k) *o++ = ',';
        memcpy(o, PyBytes_AS_STRING(e) + 6, (size_t)(PyBytes_GET_SIZE(e) - 6));
        o += PyBytes_GET_SIZE(e) - 6;
    }
    *o++ = ']';
    Py_ssize_t len = o - PyBytes_AS_STRING(joined);
    if (long_digits(PyBytes_AS_STRING(joined), len)) {
        Py_DECREF(joined);
        Py_RETURN_NONE;
    }
    if (len != size && _PyBytes_Resize(&joined, len) < 0) return NULL;
    PyObject *objs = PyObject_CallOneArg(json_loads, joined);
    Py_DECREF(joined);
    if (objs == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) {  /* orjson.JSONDecodeError */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return objs;
}

/* obj.<word> into *out, NULL when obj has no such attribute or it is None; -1 on another error. */
static int optional_attr(PyObject *obj, int word, PyObject **out) {
    *out = PyObject_GetAttr(obj, words[word]);
    if (*out == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
    } else if (*out == Py_None) {
        Py_CLEAR(*out);
    }
    return 0;
}

static int set(PyObject *record, int word, PyObject *value) {
    int got = PyObject_SetAttr(record, words[word], value);
    Py_DECREF(value);
    return got;
}

static PyObject *finish(PyObject *module, PyObject *record) {
    (void)module;
    if (json_loads == NULL) {
        PyObject *orjson = PyImport_ImportModule("orjson"), *array = PyImport_ImportModule("array");
        if (orjson != NULL && array != NULL) {
            json_loads = PyObject_GetAttrString(orjson, "loads");
            array_type = PyObject_GetAttrString(array, "array");
        }
        Py_XDECREF(orjson);
        Py_XDECREF(array);
        if (json_loads == NULL || array_type == NULL) {
            Py_CLEAR(json_loads);
            Py_CLEAR(array_type);
            return NULL;
        }
    }
    PyObject *outcome = NULL, *fallback = NULL, *status = NULL, *raw = NULL, *marks = NULL, *elided = NULL,
             *got = NULL, *objs = NULL, *result = NULL;
    if ((outcome = PyObject_GetAttr(record, words[S_OUTCOME])) == NULL ||
        (fallback = PyObject_GetAttr(record, words[S_FALLBACK])) == NULL ||
        (status = PyObject_GetAttr(record, words[S_STATUS])) == NULL ||
        (raw = PyObject_GetAttr(record, words[S_RAW])) == NULL)
        goto done;
    int overflow = 0;
    if (outcome != Py_None || fallback != Py_None || !PyLong_CheckExact(status) ||
        PyLong_AsLongAndOverflow(status, &overflow) != 200 || !PyList_Check(raw)) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    if (optional_attr(raw, S_MARKS, &marks) < 0 || optional_attr(raw, S_ELIDED, &elided) < 0) goto done;
    if (marks == NULL || !PyByteArray_CheckExact(marks) || (elided != NULL && !PyByteArray_CheckExact(elided))) {
        result = Py_NewRef(Py_False);  /* reads without marks (or of another kind): the Python parse */
        goto done;
    }
    prefetch_reads(raw);
    if ((got = marked_reads(raw, marks, elided)) == NULL) goto done;
    if (got == Py_None) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    PyObject *token_ns = PyTuple_GET_ITEM(got, 0), *items = PyTuple_GET_ITEM(got, 2);
    int ended = PyTuple_GET_ITEM(got, 1) == Py_True;
    Usage u = {NULL, NULL, NULL};
    if ((objs = decode(items)) == NULL) goto done;
    int absorbed = objs == Py_None ? 1 : absorb(objs, items, &u);
    if (absorbed < 0) goto done;
    if (absorbed > 0 || PyList_GET_SIZE(token_ns) == 0) {
        result = Py_NewRef(Py_False);
        goto done;
    }
    /* as finalize and _finish_from_stream set them */
    Py_ssize_t n_tokens = PyList_GET_SIZE(token_ns);
    PyObject *times = PyObject_CallFunctionObjArgs(array_type, words[S_Q], token_ns, NULL);
    if (times == NULL) goto done;
    if (set(record, S_RAW, Py_NewRef(Py_None)) < 0 || set(record, S_TOKEN_NS, times) < 0 ||
        set(record, S_FIRST, Py_NewRef(PyList_GET_ITEM(token_ns, 0))) < 0 ||
        set(record, S_LAST, Py_NewRef(PyList_GET_ITEM(token_ns, n_tokens - 1))) < 0 ||
        set(record, S_PROMPT, Py_NewRef(u.prompt ? u.prompt : Py_None)) < 0 ||
        set(record, S_CACHED, Py_NewRef(u.cached ? u.cached : Py_None)) < 0)
        goto done;
    PyObject *count = u.completion ? Py_NewRef(u.completion) : PyLong_FromSsize_t(n_tokens);
    if (count == NULL || set(record, S_OUTPUT_TOKENS, count) < 0 ||
        set(record, S_TOKEN_COUNT, Py_NewRef(words[u.completion ? S_USAGE : S_ESTIMATED])) < 0)
        goto done;
    if (ended) {
        if (set(record, S_OUTCOME, Py_NewRef(words[S_OK])) < 0) goto done;
    } else if (set(record, S_OUTCOME, Py_NewRef(words[S_PROTOCOL_ERROR])) < 0 ||
               set(record, S_ERROR, Py_NewRef(words[S_NO_DONE])) < 0) {
        goto done;
    }
    result = Py_NewRef(Py_True);

done:
    Py_XDECREF(outcome);
    Py_XDECREF(fallback);
    Py_XDECREF(status);
    Py_XDECREF(raw);
    Py_XDECREF(marks);
    Py_XDECREF(elided);
    Py_XDECREF(got);
    Py_XDECREF(objs);
    return result;
}

static PyMethodDef module_methods[] = {
    {"marked", marked, METH_VARARGS,
     "marked(reads, marks): (token_ns, done, items) of a marked stream as sse._parse_marked reads it, or None"},
    {"held", (PyCFunction)(void (*)(void))held, METH_FASTCALL,
     "held(reads, overhead): the payload bytes of the (t, bytes) reads plus overhead a read, or None"},
    {"finish", finish, METH_O,
     "finish(record) -> bool: finish.finalize of a usual record (status 200, a marked stream) in place; False:\n"
     "not taken, the record untouched (finalize then runs in Python)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sse", "The raw client's finished-stream parse, in C.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__sse(void) {
    for (int i = 0; i < S_COUNT; i++) {
        if (words[i] == NULL && (words[i] = PyUnicode_InternFromString(WORDS[i])) == NULL) return NULL;
    }
    return PyModule_Create(&module);
}
