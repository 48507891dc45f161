/* Bitmaps of P bits, bit i in byte i / 8 (the wire's and the shared
 * segments' layout): one way to read and write them. */
#ifndef PC_UTIL_BITS_H
#define PC_UTIL_BITS_H

static inline int pc_bit_get(const unsigned char *b, int i) { return (b[i / 8] >> (i % 8)) & 1; }
static inline void pc_bit_set(unsigned char *b, int i) { b[i / 8] |= (unsigned char)(1u << (i % 8)); }
static inline void pc_bit_clear(unsigned char *b, int i) { b[i / 8] &= (unsigned char)~(1u << (i % 8)); }
static inline void pc_bit_put(unsigned char *b, int i, int on)
{
    if (on) pc_bit_set(b, i);
    else pc_bit_clear(b, i);
}

#endif
