/* Darknet's data file reader (dt_darknet_data_read) on the lines Darknet's
 * read_data_cfg takes: spaces and tabs removed anywhere, comments, CRLF
 * line ends, keys of Darknet's other tools; and each refusal naming file
 * and line. The lists, labels and images are tests/test_darknet_data.sh's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtrain/data.h"
#include "testutil.h"

static char path[] = "/tmp/dt_darknet_XXXXXX";

/* Reads text as a data file: its status, *d filled on success. */
static dt_status read_text(dt_darknet_data *d, const char *text) {
    dt_test_write_text(path, text);
    return dt_darknet_data_read(d, path);
}

/* The message of a refused text must end with want (after "PATH"). */
static void refused(const char *text, const char *want) {
    dt_darknet_data d;
    dt_status s = read_text(&d, text);
    CHECK(s == DT_ERR_FORMAT);
    const char *msg = dt_last_error();
    size_t n = strlen(path);
    if (strncmp(msg, path, n) != 0 || strcmp(msg + n, want) != 0) {
        fprintf(stderr, "got '%s', want '%s%s'\n", msg, path, want);
        dt_test_failures++;
    }
}

int main(void) {
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);

    /* Debian's imagenet1k.data as it is written, with CRLF ends, tabs,
     * a space inside a value (Darknet's strip() drops it), comments. */
    dt_darknet_data d;
    CHECK_OK(read_text(&d, "classes=1000\r\n\ttrain  = /data/a b.list\r\n# valid = x\r\n; a comment\r\n\r\n"
                           "valid = v.list\nbackup = /b/\nlabels = l.list\nnames = n.list\ntop=5\neval=imagenet\n"
                           "map = m\nresults=r\nleaves=x\ntest=t\ntag=0"));
    CHECK(d.classes == 1000 && d.top == 5);
    CHECK(d.train && strcmp(d.train, "/data/ab.list") == 0);
    CHECK(d.valid && strcmp(d.valid, "v.list") == 0);
    CHECK(d.labels && strcmp(d.labels, "l.list") == 0);
    CHECK(d.names && strcmp(d.names, "n.list") == 0);
    CHECK(d.backup && strcmp(d.backup, "/b/") == 0);
    dt_darknet_data_free(&d);
    dt_darknet_data_free(&d); /* emptied: a no-op */
    CHECK_OK(read_text(&d, "classes=2"));
    CHECK(d.top == 0 && !d.train && !d.valid && !d.labels && !d.names && !d.backup);
    dt_darknet_data_free(&d);

    refused("classes=2\ntrain\n", ":2: 'train' is not key=value");
    refused("classes=2\ntrain = \n", ":2: train= has no value");
    refused("classes=2\nvalid=a\nvalid=b\n", ":3: valid= given twice (also on line 2)");
    refused("classes=2\nname=n\n", ":2: unknown key 'name' (did you mean names?) (Darknet's classifier reads "
                                   "classes, train, valid, labels, names, backup, top, tree)");
    refused("classes=0\n", ":1: classes=0 is not a whole number in [1, 100000]");
    refused("classes=10x\n", ":1: classes=10x is not a whole number in [1, 100000]");
    refused("classes=3\ntop=0\n", ":2: top=0 is not a whole number in [1, 100000]");
    refused("classes=3\ntag=1\n", ":2: tag=1 (labels read from tag files) is not supported; labels= finds each "
                                  "image's label in its path");
    refused("train=t\n", ": no classes= (the number of classes)");
    unlink(path);
    return dt_test_finish("test_darknet_file");
}
