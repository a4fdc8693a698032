/* Deterministic random numbers. Everything random in dtrain (init, shuffle,
 * augmentation, dropout, synthetic data, stragglers) derives from the run's
 * seed through these functions, so runs and resumes are reproducible.
 * State is a plain struct owned by the caller; no global state. */
#ifndef DTRAIN_RNG_H
#define DTRAIN_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s;  /* splitmix64 state */
} dt_rng;

/* splitmix64's increment: each draw adds it to the state, so the state after
 * k draws is the seed's plus k times it (dt_rng_skip). */
#define DT_RNG_GAMMA 0x9e3779b97f4a7c15ULL

/* Stateless 64-bit mix (splitmix64 finaliser): hash of one word. */
static inline uint64_t dt_hash64(uint64_t x) {
    x += DT_RNG_GAMMA;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Hash of several words, for per-(seed, epoch, index) streams. */
static inline uint64_t dt_hash3(uint64_t a, uint64_t b, uint64_t c) {
    return dt_hash64(dt_hash64(dt_hash64(a) ^ b) ^ c);
}

static inline dt_rng dt_rng_seed(uint64_t seed) {
    dt_rng r = {dt_hash64(seed)};
    return r;
}

static inline uint64_t dt_rng_next(dt_rng *r) {
    r->s += DT_RNG_GAMMA;
    uint64_t z = r->s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Advances r by k draws in O(1): what k calls of dt_rng_next would leave
 * (the product wraps modulo 2^64 as k additions do). */
static inline void dt_rng_skip(dt_rng *r, uint64_t k) {
    r->s += k * DT_RNG_GAMMA;
}

/* Uniform float in [0, 1) with 24 random bits. */
static inline float dt_rng_uniform(dt_rng *r) {
    return (float)(dt_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform integer in [0, n), n > 0 (Lemire's multiply-shift, tiny bias ok). */
static inline uint32_t dt_rng_below(dt_rng *r, uint32_t n) {
    return (uint32_t)(((dt_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

#endif
