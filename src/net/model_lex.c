#include "net/model_lex.h"

#include <ctype.h>
#include <string.h>

char *dt_model_trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

dt_model_line_kind dt_model_line_cut(char *line, char **key, char **val) {
    line[strcspn(line, "#;")] = '\0';
    char *s = dt_model_trim(line);
    *key = s;
    *val = NULL;
    if (!*s) return DT_MODEL_LINE_EMPTY;
    if (*s == '[') return DT_MODEL_LINE_HEADER;
    char *eq = strchr(s, '=');
    if (eq) {
        *eq = '\0';
        *key = dt_model_trim(s);
        *val = dt_model_trim(eq + 1);
    }
    return DT_MODEL_LINE_PAIR;
}
