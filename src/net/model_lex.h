/* How a model file's lines read: one lexer for the parser (model.c) and
 * for the ranks' comparison of their model files (comm.c), so that both
 * see the same sections and key=value pairs. */
#ifndef DTRAIN_NET_MODEL_LEX_H
#define DTRAIN_NET_MODEL_LEX_H

typedef enum {
    DT_MODEL_LINE_EMPTY = 0, /* blank or only a comment */
    DT_MODEL_LINE_HEADER,    /* starts with '[': *key is the whole line, "[name]" (checked by the caller) */
    DT_MODEL_LINE_PAIR       /* *key before the first '=', *val after it (NULL without '=') */
} dt_model_line_kind;

/* Cuts line in place: a '#' or ';' starts a comment (values never contain
 * either), white space around the line, a key and a value is dropped.
 * *key and *val point into line. */
dt_model_line_kind dt_model_line_cut(char *line, char **key, char **val);

/* s without white space at either end (in place; the result points into s). */
char *dt_model_trim(char *s);

#endif
