/* Sort a buffer of int64 in place, in C (loadgen.stats._sorted_ns).

A run's summary takes its ITL percentiles from the sorted gaps; a saturated run holds millions of
them. `sorted()` of an array('q') makes a list of Python ints (~36 bytes a value) and numpy, used
above a million values before, costs its import (~30 MB of resident memory and 0.1-0.3 s of CPU) and
a sorted copy. `sort(buffer)` sorts a writable buffer of 8-byte signed integers (an array('q')) in
place with no extra memory: introsort (quicksort with a median of three, insertion sort on short
ranges, heapsort when the recursion gets deep), O(n log n) in every case. Where this module is not
built, stats.py sorts as before. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

static void insertion(int64_t *a, Py_ssize_t lo, Py_ssize_t hi) {
    for (Py_ssize_t i = lo + 1; i <= hi; i++) {
        int64_t v = a[i];
        Py_ssize_t j = i - 1;
        while (j >= lo && a[j] > v) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = v;
    }
}

static void sift(int64_t *a, Py_ssize_t start, Py_ssize_t n, Py_ssize_t root) {
    int64_t v = a[start + root];
    for (;;) {
        Py_ssize_t child = 2 * root + 1;
        if (child >= n) break;
        if (child + 1 < n && a[start + child + 1] > a[start + child]) child++;
        if (a[start + child] <= v) break;
        a[start + root] = a[start + child];
        root = child;
    }
    a[start + root] = v;
}

static void heapsort_range(int64_t *a, Py_ssize_t lo, Py_ssize_t hi) {
    Py_ssize_t n = hi - lo + 1;
    for (Py_ssize_t i = n / 2 - 1; i >= 0; i--) sift(a, lo, n, i);
    for (Py_ssize_t end = n - 1; end > 0; end--) {
        int64_t t = a[lo];
        a[lo] = a[lo + end];
        a[lo + end] = t;
        sift(a, lo, end, 0);
    }
}

static void introsort(int64_t *a, Py_ssize_t lo, Py_ssize_t hi, int depth) {
    while (hi - lo > 16) {
        if (depth-- == 0) {
            heapsort_range(a, lo, hi);
            return;
        }
        Py_ssize_t mid = lo + (hi - lo) / 2;
        /* median of three to a[mid] */
        if (a[mid] < a[lo]) { int64_t t = a[mid]; a[mid] = a[lo]; a[lo] = t; }
        if (a[hi] < a[lo]) { int64_t t = a[hi]; a[hi] = a[lo]; a[lo] = t; }
        if (a[hi] < a[mid]) { int64_t t = a[hi]; a[hi] = a[mid]; a[mid] = t; }
        int64_t pivot = a[mid];
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {  /* Hoare partition: equal values split both ways (no quadratic case on repeats) */
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i <= j) {
                int64_t t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        /* the smaller side recursively, the larger one in this loop: O(log n) stack */
        if (j - lo < hi - i) {
            introsort(a, lo, j, depth);
            lo = i;
        } else {
            introsort(a, i, hi, depth);
            hi = j;
        }
    }
    insertion(a, lo, hi);
}

static PyObject *sort(PyObject *module, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    const char *format = view.format ? view.format : "B";
    if (view.itemsize != 8 || (strcmp(format, "q") != 0 && strcmp(format, "l") != 0)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "sort(buffer): a writable buffer of 8-byte signed integers");
        return NULL;
    }
    Py_ssize_t n = view.len / 8;
    if (n > 1) {
        int depth = 0;
        for (Py_ssize_t m = n; m > 1; m >>= 1) depth += 2;
        Py_BEGIN_ALLOW_THREADS  /* the export keeps the array from being resized meanwhile */
        introsort((int64_t *)view.buf, 0, n - 1, depth);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"sort", sort, METH_O, "sort(buffer): sort a writable buffer of int64 (an array('q')) in place"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sortq", "Sort int64 buffers in place, in C.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__sortq(void) { return PyModule_Create(&module); }
