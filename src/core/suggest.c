#include "dtrain/suggest.h"

#include <stdio.h>
#include <string.h>

/* Names compared are short (flags, keys): longer ones are not typos of them. */
#define MAX_LEN 64

/* Optimal string alignment distance: insertions, deletions, substitutions
 * and swaps of two neighbours (--max-stpes) cost 1. */
static int distance(const char *a, const char *b) {
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > MAX_LEN || m > MAX_LEN) return MAX_LEN * 2;
    static _Thread_local int d[MAX_LEN + 1][MAX_LEN + 1];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1], v = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

void dt_suggest_init(dt_suggest *s, const char *word) {
    s->word = word;
    s->best = NULL;
    s->dist = MAX_LEN * 2;
}

void dt_suggest_offer(dt_suggest *s, const char *candidate) {
    size_t n = strlen(s->word);
    /* A candidate the word begins (--logits for --logits-out) is as near
     * as a one-letter typo. */
    int d = n >= 4 && strncmp(candidate, s->word, n) == 0 ? 1 : distance(s->word, candidate);
    if (d < s->dist) s->dist = d, s->best = candidate;
}

const char *dt_suggest_text(const dt_suggest *s, char *buf, int cap) {
    int len = (int)strlen(s->word), limit = len / 3 > 1 ? len / 3 : 1;
    if (s->best && s->dist <= limit)
        snprintf(buf, (size_t)cap, " (did you mean %s?)", s->best);
    else if (cap > 0)
        buf[0] = '\0';
    return buf;
}
