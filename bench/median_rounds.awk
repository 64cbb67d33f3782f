# Medians of interleaved benchmark rounds (bench/cpu_threads.sh,
# bench/moe_experts.sh): input lines "A B C tokens_per_s cpu_s", one per run;
# output per key "A B C" in first-seen order: median tokens/s [min-max] and
# median CPU seconds.
{
    k = $1 " " $2 " " $3; n[k]++; tps[k, n[k]] = $4; cpu[k, n[k]] = $5
    if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
}
function med(a, k, c,   i, j, t, v) {
    for (i = 1; i <= c; i++) v[i] = a[k, i]
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    lo = v[1]; hi = v[c]
    return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
}
END {
    for (i = 1; i <= nk; i++) {
        k = order[i]; c = n[k]
        m = med(tps, k, c); l = lo; h = hi; mc = med(cpu, k, c)
        printf "%-28s %8.1f [%.1f-%.1f]  %6.1f\n", k, m, l, h, mc
    }
}
