/* Per-request work in C: a finished request's requests.jsonl line (`line`), whether orjson writes a
value as json does (`same`, loadgen.jsonbytes._same), and a prompt's token ids from its generator's
random words (`token_ids`, loadgen.workload.generator._token_ids).

One requests.jsonl line of a finished request (loadgen.results.record.request_text):

`line(record, start_ns)` returns the line `record.request_text` writes, newline included, as a str:
the same fields in the same order (`record.request_line`), encoded as orjson encodes them (compact,
ASCII, floats in their shortest round-trip form, fixed notation for 1e-5 <= |x| < 1e16 and `1.5e-6` /
`1e+16` outside it). It returns None for a record it does not take: a field of another type than
`request_line` expects (an int subclass, a float where an int goes), a string that is not ASCII or not
exactly a str, an integer past 64 bits, a float that is not finite. The caller then encodes the line in
Python, as before. Where this module is not built, or LOADGEN_NATIVE=0, the Python encoder runs.

Times are integers of ns; a field in seconds is `(t - start_ns) / 1e9`. For |n| < 4.5e15 ns (52 days)
the double nearest n / 1e9 is within half an ulp < 0.5e-9 of it, so the shortest decimal that reads
back as that double is n / 1e9 itself written with at most 9 decimals: those are formatted from the
integer directly; any other float (tpot_s) through CPython's shortest repr, re-laid in orjson's
notation. record.py checks at import that this module encodes a set of probe lines byte for byte as
the Python encoder does (else it is not used), and the tests compare thousands of random records. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static int grow(Buf *b, Py_ssize_t more) {
    if (b->n + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap * 2;
    while (cap < b->n + more) cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int put(Buf *b, const char *s, Py_ssize_t n) {
    if (grow(b, n) < 0) return -1;
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
    return 0;
}

#define PUTS(b, lit) put((b), (lit), (Py_ssize_t)(sizeof(lit) - 1))

/* Decimal digits of v (v < 10^19) right-aligned ending at end; returns the first digit's address. */
static char *digits_u64(uint64_t v, char *end) {
    char *p = end;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return p;
}

static int put_i64(Buf *b, int64_t v) {
    char tmp[24];
    char *end = tmp + sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char *p = digits_u64(u, end);
    if (v < 0) *--p = '-';
    return put(b, p, end - p);
}

/* A double from its shortest digits ds[0:nd] (no leading zero; nd >= 1) and scientific exponent e
   (value = d.ddd x 10^e), laid out as orjson lays it; neg: a leading minus. */
static int put_sci(Buf *b, int neg, const char *ds, int nd, int e) {
    if (grow(b, nd + 32) < 0) return -1;
    char *p = b->p + b->n;
    if (neg) *p++ = '-';
    if (e >= -5 && e < 16) {
        if (e >= 0) {
            for (int i = 0; i <= e; i++) *p++ = i < nd ? ds[i] : '0';
            *p++ = '.';
            if (nd > e + 1) {
                memcpy(p, ds + e + 1, (size_t)(nd - e - 1));
                p += nd - e - 1;
            } else {
                *p++ = '0';
            }
        } else {
            *p++ = '0';
            *p++ = '.';
            for (int i = 0; i < -e - 1; i++) *p++ = '0';
            memcpy(p, ds, (size_t)nd);
            p += nd;
        }
    } else {
        *p++ = ds[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, ds + 1, (size_t)(nd - 1));
            p += nd - 1;
        }
        *p++ = 'e';
        *p++ = e < 0 ? '-' : '+';
        char tmp[8];
        char *end = tmp + sizeof tmp;
        char *q = digits_u64((uint64_t)(e < 0 ? -e : e), end);
        memcpy(p, q, (size_t)(end - q));
        p += end - q;
    }
    b->n = p - b->p;
    return 0;
}

/* Any finite double: CPython's shortest repr ('r'), its digits and exponent re-laid by put_sci.
   -2: not finite (the line is the Python encoder's). */
static int put_double(Buf *b, double x) {
    if (!isfinite(x)) return -2;
    if (x == 0.0) return signbit(x) ? PUTS(b, "-0.0") : PUTS(b, "0.0");
    char *s = PyOS_double_to_string(x, 'r', 0, 0, NULL);
    if (s == NULL) return -1;
    const char *p = s;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    char ds[32];
    int nd = 0, point = -1, lead = 0, e = 0;
    /* digits before the exponent: count where the point is, skip leading zeros */
    for (; *p && *p != 'e'; p++) {
        if (*p == '.') {
            point = nd + lead;
            continue;
        }
        if (nd == 0 && *p == '0') {
            lead++;
            continue;
        }
        if (nd < (int)sizeof ds) ds[nd++] = *p;
    }
    int whole = (point < 0 ? nd + lead : point); /* digits before the point, leading zeros included */
    if (*p == 'e') e = atoi(p + 1);
    PyMem_Free(s);
    while (nd > 1 && ds[nd - 1] == '0') nd--;
    /* value = 0.[lead zeros after the point...] : the first significant digit's place */
    int sci = e + whole - lead - 1;
    return put_sci(b, neg, ds, nd, sci);
}

#define GRID_LIMIT 4500000000000000LL /* |n| ns below which n / 1e9 is written from the integer */

/* n / 1e9 as orjson writes that double (see the module comment). */
static int put_ns(Buf *b, int64_t n) {
    if (n >= GRID_LIMIT || n <= -GRID_LIMIT) return put_double(b, (double)n / 1e9);
    if (n == 0) return PUTS(b, "0.0");
    int neg = n < 0;
    uint64_t u = neg ? (uint64_t)0 - (uint64_t)n : (uint64_t)n;
    char tmp[24];
    char *end = tmp + sizeof tmp;
    char *first = digits_u64(u, end);
    int len = (int)(end - first);
    int nd = len;
    while (nd > 1 && first[nd - 1] == '0') nd--;
    return put_sci(b, neg, first, nd, len - 1 - 9);
}

/* The JSON string of an exact-str ASCII value, escaped as orjson escapes; -2: not taken. */
static int put_str(Buf *b, PyObject *s) {
    if (!PyUnicode_CheckExact(s) || !PyUnicode_IS_ASCII(s)) return -2;
    const unsigned char *p = PyUnicode_1BYTE_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (grow(b, n * 6 + 2) < 0) return -1;
    char *o = b->p + b->n;
    static const char hex[] = "0123456789abcdef";
    *o++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\t': *o++ = 't'; break;
        case '\n': *o++ = 'n'; break;
        case '\f': *o++ = 'f'; break;
        case '\r': *o++ = 'r'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o++ = '"';
    b->n = o - b->p;
    return 0;
}

/* The record's attributes, by name (interned at module init). */
enum {
    A_INDEX, A_XID, A_WARMUP, A_OUTCOME, A_ERROR, A_STATUS, A_SCHEDULED, A_SENT, A_FIRST, A_LAST,
    A_DONE, A_SLOT_FREE, A_STALL, A_INPUT_LEN, A_PROMPT, A_CACHED, A_OUTPUT_LEN, A_OUTPUT_TOKENS,
    A_TOKEN_COUNT, A_TOKEN_NS, A_SESSION, A_TURN, A_COUNT
};
static const char *const NAMES[A_COUNT] = {
    "index", "x_request_id", "warmup", "outcome", "error", "http_status", "scheduled_ns",
    "sent_ns", "first_ns", "last_ns", "done_ns", "slot_free_ns", "host_stall_ns", "input_len",
    "prompt_tokens", "cached_tokens", "output_len", "output_tokens", "token_count", "token_ns",
    "session_id", "turn_index",
};
static PyObject *names[A_COUNT];

/* An exact int that fits 64 bits into *v; 1: it is None (when allowed); -2: not taken. */
static int as_i64(PyObject *o, int64_t *v, int none_ok) {
    if (o == Py_None) return none_ok ? 1 : -2;
    if (!PyLong_CheckExact(o)) return -2;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) return -2;
    if (x == -1 && PyErr_Occurred()) return -1;
    *v = (int64_t)x;
    return 0;
}

/* ,"key": then the int, or null. */
static int put_int_field(Buf *b, const char *key, PyObject *o, int none_ok) {
    int64_t v;
    int got = as_i64(o, &v, none_ok);
    if (got < 0) return got;
    if (put(b, key, (Py_ssize_t)strlen(key)) < 0) return -1;
    return got == 1 ? PUTS(b, "null") : put_i64(b, v);
}

static int put_str_field(Buf *b, const char *key, PyObject *o, int none_ok) {
    if (o == Py_None) {
        if (!none_ok) return -2;
        if (put(b, key, (Py_ssize_t)strlen(key)) < 0) return -1;
        return PUTS(b, "null");
    }
    if (put(b, key, (Py_ssize_t)strlen(key)) < 0) return -1;
    return put_str(b, o);
}

/* ,"key": then (t - start) / 1e9, or null when t is None (t given as present/value). */
static int put_rel(Buf *b, const char *key, int present, int64_t t, int64_t start) {
    if (put(b, key, (Py_ssize_t)strlen(key)) < 0) return -1;
    if (!present) return PUTS(b, "null");
    int64_t d;
    if (__builtin_sub_overflow(t, start, &d)) return -2;
    return put_ns(b, d);
}

/* The token times as int64s: an array('q') (by its buffer), a list or a tuple of exact ints. */
typedef struct {
    Py_buffer view;
    int has_view;
    int64_t *t;
    Py_ssize_t n;
    int64_t *own;
} Times;

static int get_times(PyObject *o, Times *out) {
    memset(out, 0, sizeof *out);
    if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        PyObject **items = PySequence_Fast_ITEMS(o);
        out->own = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int64_t));
        if (out->own == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            int got = as_i64(items[i], &out->own[i], 0);
            if (got < 0) return got;
        }
        out->t = out->own;
        out->n = n;
        return 0;
    }
    if (PyObject_GetBuffer(o, &out->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return -2;
    }
    out->has_view = 1;
    const char *f = out->view.format;
    if (out->view.itemsize != 8 || f == NULL || (strcmp(f, "q") != 0 && strcmp(f, "l") != 0)) return -2;
    out->t = out->view.buf;
    out->n = out->view.len / 8;
    return 0;
}

static void drop_times(Times *t) {
    if (t->has_view) PyBuffer_Release(&t->view);
    PyMem_Free(t->own);
}

static int encode(Buf *b, PyObject **a, int64_t start) {
    int got;
    int64_t index, scheduled, sent, first = 0, last = 0, done = 0, slot_free, stall, output_tokens;
    if (as_i64(a[A_INDEX], &index, 0) < 0 || as_i64(a[A_SCHEDULED], &scheduled, 0) < 0 ||
        as_i64(a[A_SENT], &sent, 0) < 0 || as_i64(a[A_SLOT_FREE], &slot_free, 0) < 0 ||
        as_i64(a[A_STALL], &stall, 0) < 0 || as_i64(a[A_OUTPUT_TOKENS], &output_tokens, 0) < 0)
        return PyErr_Occurred() ? -1 : -2;
    int has_first = (got = as_i64(a[A_FIRST], &first, 1)) == 0;
    if (got < 0) return got;
    int has_last = (got = as_i64(a[A_LAST], &last, 1)) == 0;
    if (got < 0) return got;
    int has_done = (got = as_i64(a[A_DONE], &done, 1)) == 0;
    if (got < 0) return got;
    if (a[A_WARMUP] != Py_True && a[A_WARMUP] != Py_False) return -2;
    int64_t due = scheduled > slot_free ? scheduled : slot_free;
    int64_t lag, wait;
    if (__builtin_sub_overflow(sent, due, &lag) || __builtin_sub_overflow(due, scheduled, &wait)) return -2;

#define TRY(expr)                    \
    do {                             \
        if ((got = (expr)) < 0) return got; \
    } while (0)
    TRY(PUTS(b, "{\"index\":"));
    TRY(put_i64(b, index));
    TRY(put_str_field(b, ",\"x_request_id\":", a[A_XID], 0));
    TRY(a[A_WARMUP] == Py_True ? PUTS(b, ",\"warmup\":true") : PUTS(b, ",\"warmup\":false"));
    TRY(put_str_field(b, ",\"outcome\":", a[A_OUTCOME], 1));
    TRY(put_str_field(b, ",\"error\":", a[A_ERROR], 1));
    TRY(put_int_field(b, ",\"http_status\":", a[A_STATUS], 1));
    TRY(put_rel(b, ",\"scheduled_s\":", 1, scheduled, start));
    TRY(put_rel(b, ",\"sent_s\":", 1, sent, start));
    TRY(put_rel(b, ",\"first_token_s\":", has_first, first, start));
    TRY(put_rel(b, ",\"last_token_s\":", has_last, last, start));
    TRY(put_rel(b, ",\"done_s\":", has_done, done, start));
    TRY(put_rel(b, ",\"due_s\":", 1, due, start));
    TRY(PUTS(b, ",\"schedule_lag_s\":"));
    TRY(put_ns(b, lag));
    TRY(PUTS(b, ",\"slot_wait_s\":"));
    TRY(put_ns(b, wait));
    TRY(PUTS(b, ",\"host_stall_s\":"));
    TRY(put_ns(b, stall));
    TRY(put_rel(b, ",\"ttft_s\":", has_first, first, sent));
    TRY(PUTS(b, ",\"tpot_s\":"));
    if (!has_first || !has_last || output_tokens < 2) {
        TRY(PUTS(b, "null"));
    } else {
        int64_t span;
        if (__builtin_sub_overflow(last, first, &span)) return -2;
        TRY(put_double(b, (double)span / 1e9 / (double)(output_tokens - 1)));
    }
    TRY(put_rel(b, ",\"e2e_s\":", has_last, last, sent));
    TRY(put_int_field(b, ",\"input_len\":", a[A_INPUT_LEN], 0));
    TRY(put_int_field(b, ",\"prompt_tokens\":", a[A_PROMPT], 1));
    TRY(put_int_field(b, ",\"cached_tokens\":", a[A_CACHED], 1));
    TRY(put_int_field(b, ",\"output_len\":", a[A_OUTPUT_LEN], 0));
    TRY(PUTS(b, ",\"output_tokens\":"));
    TRY(put_i64(b, output_tokens));
    TRY(put_str_field(b, ",\"token_count\":", a[A_TOKEN_COUNT], 0));
    TRY(PUTS(b, ",\"sent_ns\":"));
    TRY(put_i64(b, sent));
    TRY(put_int_field(b, ",\"first_token_ns\":", a[A_FIRST], 1));
    TRY(put_int_field(b, ",\"last_token_ns\":", a[A_LAST], 1));
    if (a[A_SESSION] != Py_None) {
        TRY(put_str_field(b, ",\"session_id\":", a[A_SESSION], 0));
        TRY(put_int_field(b, ",\"turn_index\":", a[A_TURN], 1));
    }
    TRY(PUTS(b, ",\"itl_s\":["));
    Times t;
    got = get_times(a[A_TOKEN_NS], &t);
    if (got == 0) {
        for (Py_ssize_t i = 1; i < t.n; i++) {
            int64_t gap;
            if (__builtin_sub_overflow(t.t[i], t.t[i - 1], &gap)) {
                got = -2;
                break;
            }
            if ((i > 1 && (got = PUTS(b, ",")) < 0) || (got = put_ns(b, gap)) < 0) break;
        }
    }
    drop_times(&t);
    if (got < 0) return got;
    return PUTS(b, "]}\n");
#undef TRY
}

static PyObject *line(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "line(record, start_ns) takes 2 arguments");
        return NULL;
    }
    int64_t start;
    int got = as_i64(args[1], &start, 0);
    if (got == -1) return NULL;
    if (got < 0) Py_RETURN_NONE;
    PyObject *a[A_COUNT] = {NULL};
    PyObject *result = NULL;
    Buf b = {PyMem_Malloc(1024), 0, 1024};
    if (b.p == NULL) return PyErr_NoMemory();
    for (int i = 0; i < A_COUNT; i++) {
        a[i] = PyObject_GetAttr(args[0], names[i]);
        if (a[i] == NULL) goto done;
    }
    got = encode(&b, a, start);
    if (got == -1 || PyErr_Occurred()) goto done;
    if (got < 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyUnicode_New(b.n, 127);
    if (result != NULL) memcpy(PyUnicode_1BYTE_DATA(result), b.p, (size_t)b.n);
done:
    for (int i = 0; i < A_COUNT; i++) Py_XDECREF(a[i]);
    PyMem_Free(b.p);
    return result;
}

/* jsonbytes._same: whether orjson writes obj as json does, given ASCII output without DEL. 1, 0, or -1
   (an error: a nesting too deep, RecursionError as in Python). */
static int same_value(PyObject *obj) {
    PyTypeObject *kind = Py_TYPE(obj);
    if (kind == &PyLong_Type || kind == &PyUnicode_Type || kind == &PyBool_Type || obj == Py_None) return 1;
    if (kind == &PyFloat_Type) {  /* json writes an exponent outside [1e-4, 1e16); NaN and inf fail both */
        double x = PyFloat_AS_DOUBLE(obj);
        return x == 0.0 || (fabs(x) >= 1e-4 && fabs(x) < 1e16);
    }
    if (kind != &PyDict_Type && kind != &PyList_Type) return 0;
    if (Py_EnterRecursiveCall(" in jsonbytes.same")) return -1;
    int got = 1;
    if (kind == &PyList_Type) {
        for (Py_ssize_t i = 0; got == 1 && i < PyList_GET_SIZE(obj); i++) got = same_value(PyList_GET_ITEM(obj, i));
    } else {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (got == 1 && PyDict_Next(obj, &pos, &key, &value)) got = same_value(value);
    }
    Py_LeaveRecursiveCall();
    return got;
}

static PyObject *same(PyObject *self, PyObject *obj) {
    (void)self;
    int got = same_value(obj);
    if (got < 0) return NULL;
    return PyBool_FromLong(got);
}

/* token_ids(words, low, size): [low + floor(random() * size) for each random() the words make], where
   `words` is `rng.getrandbits(64 * n).to_bytes(8 * n, "little")`: getrandbits fills its integer with the
   generator's 32-bit words from the least significant on, so words 2i and 2i+1 are the two that the
   i-th random() would take (a = first >> 5, b = second >> 6, (a * 2^26 + b) / 2^53): the same draws, and
   the generator left in the same state. */
static PyObject *token_ids(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer words;
    long low;
    double size;
    if (!PyArg_ParseTuple(args, "y*ld:token_ids", &words, &low, &size)) return NULL;
    Py_ssize_t n = words.len / 8;
    const unsigned char *p = words.buf;
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++, p += 8) {
        uint32_t first = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        uint32_t second = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        double r = ((double)(first >> 5) * 67108864.0 + (double)(second >> 6)) * (1.0 / 9007199254740992.0);
        PyObject *id = PyLong_FromLong(low + (long)floor(r * size));
        if (id == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, id);
    }
    PyBuffer_Release(&words);
    return out;
}

static PyMethodDef methods[] = {
    {"token_ids", token_ids, METH_VARARGS,
     "token_ids(words, low, size): generator._token_ids from rng.getrandbits(64 * n).to_bytes(8 * n, 'little')"},
    {"same", same, METH_O, "same(obj) -> bool: jsonbytes._same (orjson writes obj as json does, ASCII given)"},
    {"line", (PyCFunction)(void (*)(void))line, METH_FASTCALL,
     "line(record, start_ns) -> str | None: the record's requests.jsonl line, or None when it is not taken."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_json", NULL, -1, methods};

PyMODINIT_FUNC PyInit__json(void) {
    for (int i = 0; i < A_COUNT; i++) {
        if (names[i] == NULL && (names[i] = PyUnicode_InternFromString(NAMES[i])) == NULL) return NULL;
    }
    return PyModule_Create(&module);
}
