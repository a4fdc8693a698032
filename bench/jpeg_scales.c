/* How long libjpeg-turbo takes to decode JPEGs at each of its downscaling
 * factors (tjGetScalingFactors: 1/1, 7/8, 3/4, 5/8, 1/2, 3/8, 1/4, 1/8), as
 * dtrain decodes them (tjDecompress2 to RGB, ISLOW DCT, fancy upsampling):
 * the rule of dt_image_load_region (image.h) leaves out the factors that
 * are slower than the whole image. Per file the best of REPS decodings (a
 * shared machine's other jobs only slow a decoding down), then the mean
 * over the files, in ms, one JSON line per factor.
 * usage: jpeg_scales FILE.jpg... */
#include <stdio.h>
#include <stdlib.h>
#include <turbojpeg.h>

#include "dtrain/timer.h"

enum { REPS = 20, MAX_FACTORS = 32 };

int main(int argc, char **argv) {
    int nf = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&nf);
    tjhandle tj = tjInitDecompress();
    if (!sf || !tj || nf > MAX_FACTORS || argc < 2) {
        fprintf(stderr, "usage: jpeg_scales FILE.jpg...\n");
        return 2;
    }
    double sum[MAX_FACTORS] = {0};
    for (int a = 1; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        long n = -1;
        if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
        unsigned char *data = n > 0 ? malloc((size_t)n) : NULL, *px = NULL;
        int w, h, ss, cs;
        if (!f || !data || fseek(f, 0, SEEK_SET) != 0 || fread(data, 1, (size_t)n, f) != (size_t)n ||
            tjDecompressHeader3(tj, data, (unsigned long)n, &w, &h, &ss, &cs) != 0 ||
            !(px = malloc((size_t)w * (size_t)h * 3))) {
            fprintf(stderr, "jpeg_scales: cannot read %s\n", argv[a]);
            return 1;
        }
        fclose(f);
        for (int i = 0; i < nf; i++) {
            if (sf[i].num > sf[i].denom) continue;
            int sw = TJSCALED(w, sf[i]), sh = TJSCALED(h, sf[i]);
            double best = 1e9;
            for (int r = 0; r < REPS; r++) {
                double t0 = dt_now();
                if (tjDecompress2(tj, data, (unsigned long)n, px, sw, 0, sh, TJPF_RGB, 0) != 0) {
                    fprintf(stderr, "jpeg_scales: %s: %s\n", argv[a], tjGetErrorStr2(tj));
                    return 1;
                }
                double dt = dt_now() - t0;
                best = dt < best ? dt : best;
            }
            sum[i] += best;
        }
        free(px);
        free(data);
    }
    for (int i = 0; i < nf; i++)
        if (sf[i].num <= sf[i].denom)
            printf("{\"event\":\"jpeg_scale\",\"scale\":\"%d/%d\",\"files\":%d,\"ms\":%.3f}\n", sf[i].num, sf[i].denom,
                   argc - 1, sum[i] / (argc - 1) * 1e3);
    tjDestroy(tj);
    return 0;
}
