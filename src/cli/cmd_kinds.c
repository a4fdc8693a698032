/* dtrain kinds: the layer kinds a model file may name, one a line, from the
 * registry (an example subcommand: ARCHITECTURE.md's count of the files a
 * subcommand touches). Needs no MPI (called before MPI_Init). */
#include <stdio.h>

#include "cli.h"
#include "dtrain/layer.h"

int cmd_kinds(int argc, char **argv) {
    (void)argv;
    if (argc != 0) {
        fputs("usage: dtrain kinds\n", stderr);
        return 2;
    }
    for (int k = 0; k < DT_LAYER_KIND_COUNT; k++) printf("%s\n", dt_layer_ops_of((dt_layer_kind)k)->name);
    return 0;
}
