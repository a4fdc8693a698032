/* "Did you mean X?" for a mistyped name (a flag, a model-file key): the
 * candidate nearest by edit distance (Levenshtein, with a swap of two
 * neighbours counted once; a candidate the word is the start of counts as
 * one edit), when near enough to be a typo. */
#ifndef DTRAIN_SUGGEST_H
#define DTRAIN_SUGGEST_H

typedef struct {
    const char *word; /* what was given */
    const char *best; /* the nearest candidate offered so far (NULL: none near) */
    int dist;
} dt_suggest;

void dt_suggest_init(dt_suggest *s, const char *word);
/* Considers one candidate (tables are walked by the caller). */
void dt_suggest_offer(dt_suggest *s, const char *candidate);
/* " (did you mean X?)" for the nearest candidate within a third of the
 * word's length (at least 1 edit), or "" when none is: into buf. */
const char *dt_suggest_text(const dt_suggest *s, char *buf, int cap);

#endif
