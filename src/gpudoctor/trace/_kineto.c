/* Kineto's traceEvents, scanned into columns in C: the fast path of trace/chunks.py.
 *
 * Why this exists: msgspec decodes a chunk of events into one struct per event and the Builder then
 * reads every struct's attributes back in Python; on a 1 GB trace that per-event work is half the
 * time. scan() reads one chunk (a JSON array of events, as chunks.fold_events prepares it) straight
 * into the Builder's columns, interning names and threads into the Builder's own dicts.
 *
 * What it must not do: decide anything msgspec and the Builder would decide differently. It handles
 * only well-formed, strictly typed events; on anything else (an escape in a key or a name, a string
 * pid, a float where an int belongs, a missing or negative duration, a duplicate key, bad JSON …) it
 * returns None *without touching the dicts*, and the chunk is decoded by the Python path, which counts
 * malformed events and raises the errors. tests/trace/test_native_scan.py holds both paths equal.
 *
 * Built against the stable ABI of Python 3.11 (one binary for 3.11+); hatch_build.py compiles it,
 * and gpudoctor runs without it (trace/native.py).
 */
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define OK 0
#define BAIL 1 /* not handled here: the Python path decodes the chunk */
#define ERR 2  /* a Python exception is set */
#define MAX_DEPTH 64
#define TRACE_CODE 0xFF

typedef const unsigned char *Ptr;

/* ---------------------------------------------------------------- growable output columns */

typedef struct {
    unsigned char *d;
    size_t n, cap;
} Col;

static int col_put(Col *c, const void *src, size_t k) {
    if (c->n + k > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1 << 14;
        while (cap < c->n + k) cap *= 2;
        unsigned char *d = PyMem_Realloc(c->d, cap);
        if (!d) {
            PyErr_NoMemory();
            return ERR;
        }
        c->d = d;
        c->cap = cap;
    }
    memcpy(c->d + c->n, src, k);
    c->n += k;
    return OK;
}

/* ---------------------------------------------------------------- JSON syntax */

static unsigned char STRING_STOP[256]; /* '"', '\\' and control characters end a fast string scan */
static unsigned char IS_WS[256];
static unsigned char IS_DIGIT[256];
static unsigned char IS_HEX[256];

static void init_tables(void) {
    for (int c = 0; c < 256; c++) {
        STRING_STOP[c] = c == '"' || c == '\\' || c < 0x20;
        IS_WS[c] = c == ' ' || c == '\t' || c == '\n' || c == '\r';
        IS_DIGIT[c] = c >= '0' && c <= '9';
        IS_HEX[c] = IS_DIGIT[c] || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    }
}

static inline Ptr skip_ws(Ptr p, Ptr end) {
    while (p < end && IS_WS[*p]) p++;
    return p;
}

/* The first byte at or after p that ends a fast string scan ('"', '\\' or a control character), or
 * end: 16 bytes at a time where SSE2 is there (every x86-64), a byte at a time elsewhere. */
static inline Ptr string_stop(Ptr p, Ptr end) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x1F);
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                                   _mm_cmpeq_epi8(_mm_max_epu8(x, space), space)); /* x <= 0x1F */
        int mask = _mm_movemask_epi8(hit);
        if (mask) return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && !STRING_STOP[*p]) p++;
    return p;
}

/* *pp at the opening quote; on OK, *pp is just past the closing quote and *escaped says whether a
 * backslash occurred. Control characters are malformed JSON (msgspec rejects them). */
static int skip_string(Ptr *pp, Ptr end, int *escaped) {
    Ptr p = *pp + 1;
    for (;;) {
        p = string_stop(p, end);
        if (p >= end) return BAIL;
        if (*p == '"') {
            *pp = p + 1;
            return OK;
        }
        if (*p != '\\') return BAIL;
        *escaped = 1;
        if (++p >= end) return BAIL;
        switch (*p) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p++;
            break;
        case 'u':
            if (end - p < 5 || !IS_HEX[p[1]] || !IS_HEX[p[2]] || !IS_HEX[p[3]] || !IS_HEX[p[4]]) return BAIL;
            p += 5;
            break;
        default:
            return BAIL;
        }
    }
}

static inline int skip_number(Ptr *pp, Ptr end) {
    Ptr p = *pp;
    if (p < end && *p == '-') p++;
    if (p >= end) return BAIL;
    if (*p == '0') {
        p++;
    } else if (IS_DIGIT[*p]) {
        while (p < end && IS_DIGIT[*p]) p++;
    } else {
        return BAIL;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !IS_DIGIT[*p]) return BAIL;
        while (p < end && IS_DIGIT[*p]) p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !IS_DIGIT[*p]) return BAIL;
        while (p < end && IS_DIGIT[*p]) p++;
    }
    *pp = p;
    return OK;
}

/* Checks one JSON value's syntax and steps over it: one loop with a stack of the open containers (no
 * call per nested value: an op's args are mostly small arrays of small numbers). */
static int skip_value(Ptr *pp, Ptr end) {
    unsigned char open[MAX_DEPTH]; /* '}' or ']' per open container */
    int depth = 0;
    Ptr p = *pp;
    int escaped = 0;
value:
    if (p >= end) return BAIL;
    switch (*p) {
    case '"':
        if (skip_string(&p, end, &escaped) != OK) return BAIL;
        break;
    case '{':
    case '[':
        if (depth == MAX_DEPTH) return BAIL;
        open[depth++] = *p == '{' ? '}' : ']';
        p = skip_ws(p + 1, end);
        if (p < end && *p == open[depth - 1]) {
            p++;
            depth--;
            break;
        }
        if (open[depth - 1] == ']') goto value;
        goto key;
    case 't':
        if (end - p < 4 || memcmp(p, "true", 4)) return BAIL;
        p += 4;
        break;
    case 'f':
        if (end - p < 5 || memcmp(p, "false", 5)) return BAIL;
        p += 5;
        break;
    case 'n':
        if (end - p < 4 || memcmp(p, "null", 4)) return BAIL;
        p += 4;
        break;
    default:
        if (skip_number(&p, end) != OK) return BAIL;
    }
    /* after a value */
    while (depth) {
        if (p < end && IS_WS[*p]) p = skip_ws(p, end);
        if (p >= end) return BAIL;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            if (open[depth - 1] == ']') goto value;
            goto key;
        }
        if (*p != open[depth - 1]) return BAIL;
        p++;
        depth--;
    }
    *pp = p;
    return OK;
key:
    if (p >= end || *p != '"' || skip_string(&p, end, &escaped) != OK) return BAIL;
    p = skip_ws(p, end);
    if (p >= end || *p != ':') return BAIL;
    p = skip_ws(p + 1, end);
    goto value;
}

/* ---------------------------------------------------------------- typed values */

typedef struct {
    Ptr s, e; /* the value's bytes; s == NULL when the key is absent */
} Span;

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* An integer token (no fraction, no exponent) that fits 64 bits, else BAIL (msgspec: a float is not
 * an int; a larger integer the Python path handles). */
static int span_int(Span v, int64_t absent, int64_t *out) {
    if (!v.s) {
        *out = absent;
        return OK;
    }
    Ptr p = v.s;
    int neg = 0;
    if (*p == '-') { neg = 1; p++; }
    if (p >= v.e || !IS_DIGIT[*p] || v.e - p > 18) return BAIL; /* 18 digits always fit */
    uint64_t m = 0;
    for (; p < v.e; p++) {
        if (!IS_DIGIT[*p]) return BAIL;
        m = m * 10 + (uint64_t)(*p - '0');
    }
    *out = neg ? -(int64_t)m : (int64_t)m;
    return OK;
}

/* A number token as msgspec decodes it into a float: an integer token through int64 (so "-0" is
 * 0.0), the rest exactly rounded (Clinger's fast path, else CPython's correctly rounded parser).
 * Out of range, or not a number: BAIL. */
static int span_double(Span v, double absent, double *out) {
    if (!v.s) {
        *out = absent;
        return OK;
    }
    Ptr p = v.s;
    if (*p != '-' && !IS_DIGIT[*p]) return BAIL;
    int neg = *p == '-';
    Ptr q = p + neg;
    uint64_t m = 0;
    int digits = 0, frac = 0, is_int = 1;
    long exp10 = 0;
    for (; q < v.e && IS_DIGIT[*q]; q++) {
        if (m || *q != '0') digits++;
        if (digits <= 19) m = m * 10 + (uint64_t)(*q - '0');
    }
    if (q < v.e && *q == '.') {
        is_int = 0;
        for (q++; q < v.e && IS_DIGIT[*q]; q++) {
            if (m || *q != '0') digits++;
            if (digits <= 19) {
                m = m * 10 + (uint64_t)(*q - '0');
                frac++;
            } else {
                break;
            }
        }
    }
    if (q < v.e && (*q == 'e' || *q == 'E')) {
        is_int = 0;
        q++;
        int eneg = 0;
        if (q < v.e && (*q == '+' || *q == '-')) eneg = *q++ == '-';
        long e = 0;
        for (; q < v.e && IS_DIGIT[*q]; q++)
            if (e < 100000) e = e * 10 + (*q - '0');
        exp10 = eneg ? -e : e;
    }
    if (is_int && digits <= 18 && q == v.e) {
        int64_t i;
        if (span_int(v, 0, &i) != OK) return BAIL;
        *out = (double)i;
        return OK;
    }
    exp10 -= frac;
    if (q == v.e && digits <= 19 && m <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
        double d = (double)m;
        d = exp10 < 0 ? d / POW10[-exp10] : d * POW10[exp10];
        *out = neg ? -d : d;
        return OK;
    }
    if (is_int) return BAIL; /* an integer beyond 18 digits: msgspec converts it its own way */
    char buf[128];
    size_t n = (size_t)(v.e - v.s);
    if (n >= sizeof buf) return BAIL;
    memcpy(buf, v.s, n);
    buf[n] = 0;
    char *stop = NULL;
    double d = PyOS_string_to_double(buf, &stop, NULL);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return BAIL;
    }
    if (stop != buf + n || !isfinite(d) || (d == 0.0 && m != 0)) return BAIL; /* out of range */
    *out = d;
    return OK;
}

/* A string value without escapes (its raw bytes), "" when absent; anything else BAILs. */
static int span_str(Span v, Ptr *s, size_t *n) {
    if (!v.s) {
        *s = (Ptr) "";
        *n = 0;
        return OK;
    }
    if (*v.s != '"') return BAIL;
    *s = v.s + 1;
    *n = (size_t)(v.e - v.s - 2);
    return memchr(*s, '\\', *n) ? BAIL : OK;
}

/* A thread's pid or tid: an int, or a string without escapes (its raw bytes). */
typedef struct {
    int is_str;
    int64_t value;
    Ptr s;
    size_t n;
} Id;

/* A pid or tid (msgspec: int | str); 0 when absent. With ``any_str``, a string with escapes passes
 * too (an instant's ids are checked, not kept). */
static int span_id(Span v, int any_str, Id *out) {
    if (!v.s) {
        out->is_str = 0;
        out->value = 0;
        return OK;
    }
    if (*v.s == '"') {
        out->is_str = 1;
        out->s = v.s + 1;
        out->n = (size_t)(v.e - v.s - 2);
        return any_str || !memchr(out->s, '\\', out->n) ? OK : BAIL;
    }
    out->is_str = 0;
    return span_int(v, 0, &out->value);
}

/* A string value, escapes or not (an instant's cat and name are checked, not kept). */
static int span_is_str(Span v) {
    return !v.s || *v.s == '"' ? OK : BAIL;
}

/* ---------------------------------------------------------------- interning */

#define TRY(expr) do { int rc_ = (expr); if (rc_ != OK) return rc_; } while (0)

/* A str from raw bytes; BAIL when they are not UTF-8 (the strict decode rejects such a name). */
static int decode_utf8(Ptr s, size_t n, PyObject **out) {
    *out = PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, NULL);
    if (*out) return OK;
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        return BAIL;
    }
    return ERR;
}

static inline uint64_t hash_bytes(Ptr s, size_t n) {
    /* 8 bytes at a time (collisions only cost a memcmp: every hit is compared in full) */
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

typedef struct {
    Ptr s; /* a name's raw bytes */
    size_t n;
    uint64_t h;
    Id pid, tid; /* a thread's */
    uint32_t id;
    int used;
} Slot;

/* One call's view of a Python dict that interns keys to ids 0, 1, 2 … in order of first sight: a
 * local table in front of it, and the keys first seen in this chunk held back until the chunk is done
 * (a chunk that BAILs leaves the dict as it was). */
typedef struct {
    PyObject *dict;    /* borrowed */
    PyObject *pending; /* list of new keys, in order */
    Py_ssize_t base;   /* len(dict) at the start */
    Slot *slots;
    size_t mask, used;
} Interner;

static int interner_init(Interner *t, PyObject *dict) {
    t->dict = dict;
    t->base = PyDict_Size(dict);
    t->pending = PyList_New(0);
    t->mask = 1023;
    t->used = 0;
    t->slots = PyMem_Calloc(t->mask + 1, sizeof(Slot));
    if (!t->pending || !t->slots) {
        if (!t->slots) PyErr_NoMemory();
        return ERR;
    }
    return OK;
}

static void interner_free(Interner *t) {
    Py_XDECREF(t->pending);
    PyMem_Free(t->slots);
}

static int interner_grow(Interner *t) {
    size_t mask = t->mask * 2 + 1;
    Slot *slots = PyMem_Calloc(mask + 1, sizeof(Slot));
    if (!slots) {
        PyErr_NoMemory();
        return ERR;
    }
    for (size_t i = 0; i <= t->mask; i++) {
        if (!t->slots[i].used) continue;
        size_t j = t->slots[i].h & mask;
        while (slots[j].used) j = (j + 1) & mask;
        slots[j] = t->slots[i];
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = mask;
    return OK;
}

/* The id of ``key`` (a new reference, stolen) in the dict, or the next free one (held back). */
static int interner_resolve(Interner *t, PyObject *key, uint32_t *id) {
    if (!key) return ERR;
    PyObject *known = PyDict_GetItemWithError(t->dict, key);
    if (known) {
        long v = PyLong_AsLong(known);
        Py_DECREF(key);
        if (v == -1 && PyErr_Occurred()) return ERR;
        *id = (uint32_t)v;
        return OK;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return ERR;
    }
    *id = (uint32_t)(t->base + PyList_Size(t->pending));
    int rc = PyList_Append(t->pending, key);
    Py_DECREF(key);
    return rc ? ERR : OK;
}

static int intern_name(Interner *t, Ptr s, size_t n, uint32_t *id) {
    uint64_t h = hash_bytes(s, n);
    size_t j = h & t->mask;
    while (t->slots[j].used) {
        Slot *sl = &t->slots[j];
        if (sl->h == h && sl->n == n && memcmp(sl->s, s, n) == 0) {
            *id = sl->id;
            return OK;
        }
        j = (j + 1) & t->mask;
    }
    PyObject *key;
    TRY(decode_utf8(s, n, &key));
    if (interner_resolve(t, key, id) != OK) return ERR;
    Slot *sl = &t->slots[j];
    sl->s = s; sl->n = n; sl->h = h; sl->id = *id; sl->used = 1;
    if (++t->used * 2 > t->mask) return interner_grow(t);
    return OK;
}

static inline uint64_t hash_id(Id v) {
    return v.is_str ? hash_bytes(v.s, v.n) : (uint64_t)v.value * 0x9E3779B97F4A7C15ULL;
}

static inline int same_id(Id x, Id y) {
    return x.is_str == y.is_str && (x.is_str ? x.n == y.n && memcmp(x.s, y.s, x.n) == 0 : x.value == y.value);
}

static PyObject *id_object(Id v) {
    return v.is_str ? PyUnicode_DecodeUTF8((const char *)v.s, (Py_ssize_t)v.n, NULL) : PyLong_FromLongLong(v.value);
}

static int intern_thread(Interner *t, Id pid, Id tid, uint32_t *id) {
    uint64_t h = hash_id(pid) ^ (hash_id(tid) + 0x632BE59BD9B4E019ULL);
    h ^= h >> 31;
    size_t j = h & t->mask;
    while (t->slots[j].used) {
        Slot *sl = &t->slots[j];
        if (sl->h == h && same_id(sl->pid, pid) && same_id(sl->tid, tid)) {
            *id = sl->id;
            return OK;
        }
        j = (j + 1) & t->mask;
    }
    PyObject *pa = id_object(pid), *pb = id_object(tid);
    if (!pa || !pb) {
        Py_XDECREF(pa);
        Py_XDECREF(pb);
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return BAIL;
        }
        return ERR;
    }
    PyObject *key = PyTuple_Pack(2, pa, pb);
    Py_DECREF(pa);
    Py_DECREF(pb);
    if (interner_resolve(t, key, id) != OK) return ERR;
    Slot *sl = &t->slots[j];
    sl->pid = pid; sl->tid = tid; sl->h = h; sl->id = *id; sl->used = 1;
    if (++t->used * 2 > t->mask) return interner_grow(t);
    return OK;
}

/* Adds the held-back keys to the dict (the chunk is done). */
static int interner_commit(Interner *t) {
    Py_ssize_t n = PyList_Size(t->pending);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PyLong_FromSsize_t(t->base + i);
        if (!id) return ERR;
        int rc = PyDict_SetItem(t->dict, PyList_GetItem(t->pending, i), id);
        Py_DECREF(id);
        if (rc) return ERR;
    }
    return OK;
}

/* ---------------------------------------------------------------- events */

typedef struct {
    Span ph, cat, name, pid, tid, ts, dur, args;
    Span stream, correlation, nbytes, allocated, reserved, device_type;
    int args_object;
} Event;

enum { COL_CODE, COL_NAME, COL_THREAD, COL_TS, COL_DUR, COL_STREAM, COL_CORR, COL_BYTES,
       COL_MEM_TS, COL_MEM_ALLOC, COL_MEM_RESERVED, N_COLS };

typedef struct {
    Col cols[N_COLS];
    Interner names, threads;
    PyObject *code_by_cat; /* borrowed */
    /* the last category seen and its code: a chunk holds a handful of categories, in runs */
    Ptr cat_s;
    size_t cat_n;
    int cat_code;
} Scan;

#define KEY(len, lit) (n == (len) && memcmp(k, lit, len) == 0)

/* Records the value's span under its key, if it is one the tables read; a key seen twice BAILs. */
static int take(Span *slot, Ptr s, Ptr e) {
    if (slot->s) return BAIL;
    slot->s = s;
    slot->e = e;
    return OK;
}

typedef int (*MemberFn)(Event *ev, Ptr key, size_t n, Ptr *pp, Ptr end);

/* Walks one object (*pp at its "{"): each member's key (which must have no escapes) and its value's
 * position go to ``member``, which steps over the value. */
static int scan_members(Ptr *pp, Ptr end, Event *ev, MemberFn member) {
    Ptr p = skip_ws(*pp + 1, end);
    if (p < end && *p == '}') {
        *pp = p + 1;
        return OK;
    }
    for (;;) {
        int escaped = 0;
        if (p >= end || *p != '"') return BAIL;
        Ptr k = p + 1;
        if (skip_string(&p, end, &escaped) != OK || escaped) return BAIL;
        size_t n = (size_t)(p - k - 1);
        p = skip_ws(p, end);
        if (p >= end || *p != ':') return BAIL;
        p = skip_ws(p + 1, end);
        if (member(ev, k, n, &p, end) != OK) return BAIL;
        p = skip_ws(p, end);
        if (p >= end) return BAIL;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (*p == '}') {
            *pp = p + 1;
            return OK;
        }
        return BAIL;
    }
}

/* One member of an event's args: the ids and memory counters are recorded, the rest skipped. */
static int args_member(Event *ev, Ptr k, size_t n, Ptr *pp, Ptr end) {
    Ptr s = *pp;
    if (skip_value(pp, end) != OK) return BAIL;
    Span *slot = NULL;
    if (KEY(6, "stream")) slot = &ev->stream;
    else if (KEY(11, "correlation")) slot = &ev->correlation;
    else if (KEY(5, "bytes")) slot = &ev->nbytes;
    else if (KEY(15, "Total Allocated")) slot = &ev->allocated;
    else if (KEY(14, "Total Reserved")) slot = &ev->reserved;
    else if (KEY(11, "Device Type")) slot = &ev->device_type;
    return slot ? take(slot, s, *pp) : OK;
}

/* One member of an event: the keys the tables read are recorded (args member by member), the rest
 * checked for syntax and skipped. */
static int event_member(Event *ev, Ptr k, size_t n, Ptr *pp, Ptr end) {
    Ptr s = *pp;
    if (KEY(4, "args") && *pp < end && **pp == '{') {
        if (ev->args.s) return BAIL;
        ev->args_object = 1;
        if (scan_members(pp, end, ev, args_member) != OK) return BAIL;
        return take(&ev->args, s, *pp);
    }
    if (skip_value(pp, end) != OK) return BAIL;
    Span *slot = NULL;
    switch (n) {
    case 2:
        if (KEY(2, "ph")) slot = &ev->ph;
        else if (KEY(2, "ts")) slot = &ev->ts;
        break;
    case 3:
        if (KEY(3, "cat")) slot = &ev->cat;
        else if (KEY(3, "pid")) slot = &ev->pid;
        else if (KEY(3, "tid")) slot = &ev->tid;
        else if (KEY(3, "dur")) slot = &ev->dur;
        break;
    case 4:
        if (KEY(4, "name")) slot = &ev->name;
        else if (KEY(4, "args")) slot = &ev->args; /* not an object: the strict decode fails */
        break;
    }
    return slot ? take(slot, s, *pp) : OK;
}

static const char SKIPPED_PHASES[] = "BEIbnestfPONDMVvRc()STpFCG";

static int category_code(Scan *sc, Ptr s, size_t n, int *code) {
    if (sc->cat_s && sc->cat_n == n && memcmp(sc->cat_s, s, n) == 0) {
        *code = sc->cat_code;
        return OK;
    }
    PyObject *key;
    TRY(decode_utf8(s, n, &key));
    PyObject *v = PyDict_GetItemWithError(sc->code_by_cat, key);
    Py_DECREF(key);
    long c = 0;
    if (v) {
        c = PyLong_AsLong(v);
        if (c == -1 && PyErr_Occurred()) return ERR;
    } else if (PyErr_Occurred()) {
        return ERR;
    }
    sc->cat_s = s;
    sc->cat_n = n;
    sc->cat_code = (int)c;
    *code = (int)c;
    return OK;
}

/* Checks one event's types as the strict decode would and appends it to the columns. */
static int emit(Scan *sc, Event *ev) {
    Ptr ph;
    size_t phn;
    if (!ev->ph.s || span_str(ev->ph, &ph, &phn) != OK || phn != 1) return BAIL;
    int complete = ph[0] == 'X', instant = ph[0] == 'i';
    if (!complete && !instant) return strchr(SKIPPED_PHASES, ph[0]) && ph[0] ? OK : BAIL;

    Ptr cat = NULL, name = NULL;
    size_t catn = 0, namen = 0;
    Id pid, tid;
    int64_t stream, corr, nbytes, device_type;
    double ts, dur, allocated, reserved;
    if (instant) {
        TRY(span_is_str(ev->cat));
        TRY(span_is_str(ev->name));
    } else {
        TRY(span_str(ev->cat, &cat, &catn));
        TRY(span_str(ev->name, &name, &namen));
    }
    TRY(span_id(ev->pid, instant, &pid));
    TRY(span_id(ev->tid, instant, &tid));
    TRY(span_double(ev->ts, NAN, &ts));
    TRY(span_double(ev->dur, NAN, &dur));
    if (ev->args.s && !ev->args_object) return BAIL;
    TRY(span_int(ev->stream, -1, &stream));
    TRY(span_int(ev->correlation, -1, &corr));
    TRY(span_int(ev->nbytes, -1, &nbytes));
    if (instant) {
        TRY(span_int(ev->device_type, -1, &device_type));
        TRY(span_double(ev->allocated, NAN, &allocated));
        TRY(span_double(ev->reserved, NAN, &reserved));
        if (device_type == 1 && isfinite(allocated) && isfinite(ts)) {
            double r = isfinite(reserved) ? reserved : -1.0;
            TRY(col_put(&sc->cols[COL_MEM_TS], &ts, 8));
            TRY(col_put(&sc->cols[COL_MEM_ALLOC], &allocated, 8));
            TRY(col_put(&sc->cols[COL_MEM_RESERVED], &r, 8));
        }
        return OK;
    }
    int code;
    TRY(category_code(sc, cat, catn, &code));
    if (code == TRACE_CODE) return OK; /* the whole profile's span: not an event the tables keep */
    /* counted as malformed there (events.time_problem: the same bounds, MAX_TS_US and MAX_DUR_US) */
    if (!isfinite(ts) || !isfinite(dur) || dur < 0.0 || dur > 86400e6 || fabs(ts) > 9007199254740992.0) return BAIL;
    uint32_t name_id, thread_id;
    TRY(intern_name(&sc->names, name, namen, &name_id));
    TRY(intern_thread(&sc->threads, pid, tid, &thread_id));
    unsigned char c = (unsigned char)code;
    TRY(col_put(&sc->cols[COL_CODE], &c, 1));
    TRY(col_put(&sc->cols[COL_NAME], &name_id, 4));
    TRY(col_put(&sc->cols[COL_THREAD], &thread_id, 4));
    TRY(col_put(&sc->cols[COL_TS], &ts, 8));
    TRY(col_put(&sc->cols[COL_DUR], &dur, 8));
    TRY(col_put(&sc->cols[COL_STREAM], &stream, 8));
    TRY(col_put(&sc->cols[COL_CORR], &corr, 8));
    TRY(col_put(&sc->cols[COL_BYTES], &nbytes, 8));
    return OK;
}

static int scan_array(Scan *sc, Ptr p, Ptr end) {
    p = skip_ws(p, end);
    if (p >= end || *p != '[') return BAIL;
    p = skip_ws(p + 1, end);
    if (p < end && *p == ']') return skip_ws(p + 1, end) == end ? OK : BAIL;
    for (;;) {
        if (p >= end || *p != '{') return BAIL;
        Event ev;
        ev.ph.s = ev.cat.s = ev.name.s = ev.pid.s = ev.tid.s = ev.ts.s = ev.dur.s = ev.args.s = NULL;
        ev.stream.s = ev.correlation.s = ev.nbytes.s = ev.allocated.s = ev.reserved.s = ev.device_type.s = NULL;
        ev.args_object = 0;
        TRY(scan_members(&p, end, &ev, event_member));
        TRY(emit(sc, &ev));
        p = skip_ws(p, end);
        if (p >= end) return BAIL;
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (*p == ']') return skip_ws(p + 1, end) == end ? OK : BAIL;
        return BAIL;
    }
}

/* The columns' buffers, kept from one call to the next: a fresh buffer per chunk meant fresh pages
 * (mmap, page faults, zeroing) for every chunk. scan() holds the GIL from start to end, so one set
 * of buffers serves every caller. */
static Col SPARE[N_COLS];

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *source, *names, *threads, *code_by_cat;
    if (!PyArg_ParseTuple(args, "OO!O!O!:scan", &source, &PyDict_Type, &names, &PyDict_Type, &threads,
                          &PyDict_Type, &code_by_cat))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(source, &view, PyBUF_SIMPLE) < 0) return NULL;
    Scan sc;
    memset(&sc, 0, sizeof sc);
    for (int i = 0; i < N_COLS; i++) sc.cols[i] = SPARE[i]; /* emptied, capacity kept */
    sc.code_by_cat = code_by_cat;
    PyObject *result = NULL;
    int rc = interner_init(&sc.names, names);
    if (rc == OK) rc = interner_init(&sc.threads, threads);
    if (rc == OK) rc = scan_array(&sc, (Ptr)view.buf, (Ptr)view.buf + view.len);
    if (rc == OK) rc = interner_commit(&sc.names);
    if (rc == OK) rc = interner_commit(&sc.threads);
    if (rc == OK) {
        result = PyTuple_New(N_COLS);
        for (int i = 0; result && i < N_COLS; i++) {
            PyObject *b = PyBytes_FromStringAndSize((const char *)sc.cols[i].d, (Py_ssize_t)sc.cols[i].n);
            if (!b || PyTuple_SetItem(result, i, b) < 0) Py_CLEAR(result);
        }
    } else if (rc == BAIL) {
        result = Py_NewRef(Py_None);
    }
    for (int i = 0; i < N_COLS; i++) {
        SPARE[i] = sc.cols[i];
        SPARE[i].n = 0;
    }
    interner_free(&sc.names);
    interner_free(&sc.threads);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef METHODS[] = {
    {"scan", scan, METH_VARARGS,
     "scan(chunk, names, threads, code_by_cat) -> tuple of 11 column bytes, or None when the Python "
     "path must decode the chunk"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_kineto", NULL, -1, METHODS,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kineto(void) {
    init_tables();
    return PyModule_Create(&MODULE);
}
