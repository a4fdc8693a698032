/* Replays inputs through a harness's LLVMFuzzerTestOneInput without
 * libFuzzer, so any compiler and every build (release, ASan) can run the
 * committed corpora: `fuzz_X_replay FILE_OR_DIR...`. Each input sits in a
 * buffer of exactly its size, so ASan sees any read past its end. Exits 0
 * when every input ran (a broken property aborts), 1 on unreadable paths. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 0;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
        perror(path);
        fclose(f);
        return 0;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *data = malloc(size ? size : 1);
    int ok = data && fread(data, 1, size, f) == size;
    fclose(f);
    if (!ok) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(data);
        return 0;
    }
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 1;
}

/* Runs path (a file, or every file of a directory, in name order); counts
 * the inputs run in *n. 0 if something could not be read. */
static int replay(const char *path, int *n) {
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        *n += 1;
        return replay_file(path);
    }
    struct dirent **names;
    int count = scandir(path, &names, NULL, alphasort), ok = count >= 0;
    if (!ok) perror(path);
    for (int i = 0; i < count; i++) {
        if (names[i]->d_name[0] != '.') {
            char child[4096];
            snprintf(child, sizeof child, "%s/%s", path, names[i]->d_name);
            ok &= replay(child, n);
        }
        free(names[i]);
    }
    if (count >= 0) free(names);
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    int n = 0, ok = 1;
    for (int i = 1; i < argc; i++) ok &= replay(argv[i], &n);
    printf("%s: replayed %d inputs\n", argv[0], n);
    return ok && n > 0 ? 0 : 1;
}
