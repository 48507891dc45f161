#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int pc_parse_long(const char *text, long min, long max, long *out)
{
    /* strict: an optional '-', digits, nothing else (strtol alone would
     * accept leading blanks and a '+') */
    if (!text || !(isdigit((unsigned char)text[0]) || (text[0] == '-' && isdigit((unsigned char)text[1]))))
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end != '\0' || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int pc_parse_double(const char *text, double *out)
{
    if (!text || !*text || isspace((unsigned char)text[0])) return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || *end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int pc_parse_bytes(const char *text, size_t *out)
{
    if (!text || !isdigit((unsigned char)*text)) return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno) return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    default: break;
    }
    if (shift && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0') return -1;
    if (v > (SIZE_MAX >> shift)) return -1;
    *out = (size_t)v << shift;
    return 0;
}

const char *pc_format_bytes(size_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (v == floor(v))
        snprintf(buf, len, "%.0f %s", v, units[u]);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}
