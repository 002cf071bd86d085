"""String ops on object arrays of Python str: concat, normalize, split, regex match, tf-idf."""
from __future__ import annotations

import re

import numpy as np

from . import reference


def _strings(x) -> np.ndarray:
    return np.asarray(x, dtype=object)


@reference("string_concat")
def string_concat(X, Y):
    a, b = np.broadcast_arrays(_strings(X), _strings(Y))
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(a.shape):
        out[idx] = str(a[idx]) + str(b[idx])
    return out


@reference("string_normalizer")
def string_normalizer(X, case_change_action="NONE", is_case_sensitive=0, locale=None, stopwords=None):
    x = _strings(X)
    words = list(x.reshape(-1))
    if stopwords:
        if is_case_sensitive:
            stop = set(stopwords)
            words = [w for w in words if w not in stop]
        else:
            stop = {s.lower() for s in stopwords}
            words = [w for w in words if w.lower() not in stop]
    if case_change_action == "LOWER":
        words = [w.lower() for w in words]
    elif case_change_action == "UPPER":
        words = [w.upper() for w in words]
    if not words:
        words = [""]
    out = np.array(words, dtype=object)
    return out.reshape(1, -1) if x.ndim == 2 else out


@reference("string_split")
def string_split(X, delimiter=None, maxsplit=None):
    x = _strings(X)
    sep = delimiter if delimiter else None  # None: split on runs of whitespace, trimmed
    limit = -1 if maxsplit is None else maxsplit
    parts = {idx: str(x[idx]).split(sep, limit) for idx in np.ndindex(x.shape)}
    width = max((len(p) for p in parts.values()), default=0)
    Y = np.full(x.shape + (width,), "", dtype=object)
    Z = np.zeros(x.shape, dtype=np.int64)
    for idx, p in parts.items():
        Y[idx][:len(p)] = p
        Z[idx] = len(p)
    return Y, Z


@reference("regex_full_match")
def regex_full_match(X, pattern):
    rx = re.compile(pattern)
    x = _strings(X)
    out = np.zeros(x.shape, dtype=bool)
    for idx in np.ndindex(x.shape):
        out[idx] = rx.fullmatch(str(x[idx])) is not None
    return out


def _ngram_table(pool, ngram_counts, ngram_indexes):
    """{n-gram tuple: index of that n-gram in the pool (0-based, counted in n-grams)}."""
    table = {}
    k = 0
    starts = list(ngram_counts) + [len(pool)]
    for n, (lo, hi) in enumerate(zip(starts[:-1], starts[1:]), start=1):
        for pos in range(lo, hi, n):
            table[tuple(pool[pos:pos + n])] = k
            k += 1
    return table


@reference("tfidf_vectorizer")
def tfidf_vectorizer(X, max_gram_length, max_skip_count, min_gram_length, mode, ngram_counts, ngram_indexes,
                     pool_int64s=None, pool_strings=None, weights=None):
    pool = list(pool_int64s) if pool_int64s is not None else list(pool_strings)
    table = _ngram_table(pool, ngram_counts, ngram_indexes)
    w = np.ones(len(ngram_indexes)) if weights is None else np.asarray(weights, dtype=np.float64)
    size = max(ngram_indexes) + 1
    x = np.asarray(X)
    rows = x.reshape(1, -1) if x.ndim == 1 else x.reshape(x.shape[0], -1)
    out = np.zeros((rows.shape[0], size))
    for r, row in enumerate(rows):
        items = [v.item() if isinstance(v, np.generic) else v for v in row]
        counts = np.zeros(len(ngram_indexes))
        for n in range(min_gram_length, max_gram_length + 1):
            for skip in range(max_skip_count + 1 if n > 1 else 1):  # 1-grams have no gaps
                step = skip + 1
                for start in range(len(items) - (n - 1) * step):
                    key = tuple(items[start + j * step] for j in range(n))
                    if key in table:
                        counts[table[key]] += 1
        if mode == "TF":
            vals = counts
        elif mode == "IDF":
            vals = np.minimum(counts, 1) * w
        else:  # TFIDF
            vals = counts * w
        for i, idx in enumerate(ngram_indexes):
            out[r, idx] += vals[i]
    out = out.astype(np.float32)
    return out[0] if x.ndim == 1 else out
