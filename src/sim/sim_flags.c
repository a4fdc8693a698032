/* The simulator's inputs as the command line spells them: a mode with an
 * optional +sfb or +sacp, link bandwidths and latencies with their units
 * (sim.h). Which modes the model covers is sim.c's (dt_sim_models). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/sim.h"

static const char *const factor_names[] = {[DT_SFB_ALL] = "sfb", [DT_SFB_AUTO] = "sacp"};

dt_status dt_sim_parse_mode(const char *text, const char *flag, dt_mode *mode, dt_sfb_policy *factors) {
    char name[64];
    const char *plus = strchr(text, '+');
    size_t n = plus ? (size_t)(plus - text) : strlen(text);
    snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), text);
    int m = dt_mode_from_name(name);
    char modelled[256] = "";
    for (int k = 0, used = 0; k <= DT_MODE_PS_HOGWILD; k++)
        if (dt_sim_models((dt_mode)k))
            used += snprintf(modelled + used, sizeof modelled - (size_t)used, "%s%s", used ? ", " : "",
                             dt_mode_name((dt_mode)k));
    if (strcmp(name, "sfb") == 0 || strcmp(name, "sacp") == 0)
        return dt_fail(DT_ERR_USAGE, "%s: %s is an option of a mode, not a mode: write ps-sync+%s or allreduce+%s",
                       flag, name, name, name);
    if (m < 0) return dt_fail(DT_ERR_USAGE, "%s: unknown mode '%s' (the simulator models %s)", flag, name, modelled);
    if (!dt_sim_models((dt_mode)m))
        return dt_fail(DT_ERR_USAGE, "%s: the simulator does not model %s (it models %s)", flag, name, modelled);
    *mode = (dt_mode)m;
    *factors = DT_SFB_OFF;
    if (!plus) return DT_OK;
    if (strcmp(plus + 1, "sfb") == 0) *factors = DT_SFB_ALL;
    else if (strcmp(plus + 1, "sacp") == 0) *factors = DT_SFB_AUTO;
    else return dt_fail(DT_ERR_USAGE, "%s: '%s': after + comes sfb or sacp", flag, text);
    if (!(dt_mode_info_of(*mode)->flags & DT_MF_FACTORS)) {
        char who[64];
        return dt_fail(DT_ERR_USAGE, "%s: %s: %s has no sufficient factors (%s have)", flag, text, name,
                       dt_mode_list(DT_MF_FACTORS, who, sizeof who));
    }
    return DT_OK;
}

const char *dt_sim_mode_name(dt_mode mode, dt_sfb_policy factors, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%s%s", dt_mode_name(mode), factors ? "+" : "", factors ? factor_names[factors] : "");
    return buf;
}

/* "<number><unit>" with unit one of units[i] (scale[i] each): value in base units. */
static dt_status parse_with_unit(const char *s, const char *flag, const char *const *units,
                                 const double *scale, int nunits, int allow_zero, const char *help,
                                 double *out) {
    char *end;
    double v = strtod(s, &end);
    int ok = end != s && isfinite(v) && (v > 0 || (allow_zero && v == 0));
    for (int i = 0; ok && i < nunits; i++)
        if (strcmp(end, units[i]) == 0) {
            *out = v * scale[i];
            return DT_OK;
        }
    return dt_fail(DT_ERR_USAGE, "%s: '%s' is not %s", flag, s, help);
}

dt_status dt_sim_parse_bandwidth(const char *s, const char *flag, double *bytes_per_s) {
    static const char *const units[] = {"bps", "Kbps", "kbps", "Mbps", "Gbps", "Tbps",
                                        "B/s", "KB/s", "kB/s", "MB/s", "GB/s", "TB/s"};
    static const double scale[] = {1 / 8.0, 1e3 / 8, 1e3 / 8, 1e6 / 8, 1e9 / 8, 1e12 / 8,
                                   1, 1e3, 1e3, 1e6, 1e9, 1e12};
    return parse_with_unit(s, flag, units, scale, (int)(sizeof scale / sizeof *scale), 0,
                           "a bandwidth (a positive number and a unit: 100Mbps, 1Gbps, 10Gbps, 25Gbps; "
                           "bps, Kbps, Mbps, Gbps, Tbps for bits, B/s, KB/s, MB/s, GB/s for bytes)",
                           bytes_per_s);
}

dt_status dt_sim_parse_latency(const char *s, double *seconds) {
    static const char *const units[] = {"ns", "us", "ms", "s"};
    static const double scale[] = {1e-9, 1e-6, 1e-3, 1};
    return parse_with_unit(s, "--latency", units, scale, 4, 1,
                           "a latency (a number >= 0 and a unit: ns, us, ms or s, e.g. 20us, 1ms)", seconds);
}
