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
    /* strict: an optional '-', then a digit or a '.'; decimal only (strtod
     * alone would take blanks, a '+', hexadecimal and "inf") */
    if (!text) return -1;
    const char *t = text[0] == '-' ? text + 1 : text;
    if (!(isdigit((unsigned char)t[0]) || (t[0] == '.' && isdigit((unsigned char)t[1])))) return -1;
    if (strpbrk(text, "xXpP")) return -1;
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

