/*
 * The number parsers of the PCOLL_* variables and the tools' flags
 * (util/parse.c): strict (no blanks, no '+', nothing after the number),
 * ranges, byte units, and overflow.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "util/parse.h"
#include "unit_check.h"


static void longs(void)
{
    long v = 0;
    CHECK(pc_parse_long("42", 0, 100, &v) == 0 && v == 42);
    CHECK(pc_parse_long("-7", -10, 10, &v) == 0 && v == -7);
    CHECK(pc_parse_long("0", 0, 0, &v) == 0 && v == 0);
    const char *bad[] = {"", " 5", "5 ", "+5", "5x", "x", "-", "--1", "1.0", "0x10", NULL};
    for (int i = 0; bad[i]; i++) CHECK(pc_parse_long(bad[i], -100, 100, &v) == -1);
    CHECK(pc_parse_long(NULL, 0, 1, &v) == -1);
    CHECK(pc_parse_long("101", 0, 100, &v) == -1); /* range */
    CHECK(pc_parse_long("-1", 0, 100, &v) == -1);
    CHECK(pc_parse_long("99999999999999999999999", 0, LONG_MAX, &v) == -1); /* overflow */
    v = 3;
    CHECK(pc_parse_long("nope", 0, 5, &v) == -1 && v == 3); /* untouched on failure */
}

static void doubles(void)
{
    double d = 0;
    CHECK(pc_parse_double("2.5", &d) == 0 && d == 2.5);
    CHECK(pc_parse_double("-1", &d) == 0 && d == -1);
    CHECK(pc_parse_double(".5", &d) == 0 && d == 0.5);
    CHECK(pc_parse_double("1e3", &d) == 0 && d == 1000);
    CHECK(pc_parse_double("0", &d) == 0 && d == 0);
    const char *bad[] = {"", " 1", "1 ", "+1", "1.5s", "inf", "-inf", "nan", "0x10", "1e999", ".", "-", "e3", NULL};
    for (int i = 0; bad[i]; i++) CHECK(pc_parse_double(bad[i], &d) == -1);
    CHECK(pc_parse_double(NULL, &d) == -1);
}

static void bytes(void)
{
    size_t b = 0;
    CHECK(pc_parse_bytes("4096", &b) == 0 && b == 4096);
    CHECK(pc_parse_bytes("64K", &b) == 0 && b == 65536);
    CHECK(pc_parse_bytes("4M", &b) == 0 && b == (size_t)4 << 20);
    CHECK(pc_parse_bytes("1G", &b) == 0 && b == (size_t)1 << 30);
    CHECK(pc_parse_bytes("2k", &b) == 0 && b == 2048);
    CHECK(pc_parse_bytes("8KiB", &b) == 0 && b == 8192);
    CHECK(pc_parse_bytes("8KB", &b) == 0 && b == 8192);
    CHECK(pc_parse_bytes("0", &b) == 0 && b == 0);
    const char *bad[] = {"", " 4K", "4K ", "+4", "-4", "4T", "4KK", "K", "4.5M", "4 K", NULL};
    for (int i = 0; bad[i]; i++) CHECK(pc_parse_bytes(bad[i], &b) == -1);
    CHECK(pc_parse_bytes("99999999999999999999G", &b) == -1); /* overflow */
    CHECK(pc_parse_bytes("17179869184G", &b) == -1);         /* 2^34 G: past SIZE_MAX */
}

int main(void)
{
    longs();
    doubles();
    bytes();
    printf("test_parse: %ld checks passed\n", checks);
    return 0;
}
