/* CRC-32C (Castagnoli, the polynomial of iSCSI, RFC 3720) and the masked
 * form TFRecord files store beside each length and payload. */
#ifndef FABULA_TBOARD_CRC32C_H
#define FABULA_TBOARD_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of n bytes (initial value and final xor 0xffffffff). */
uint32_t crc32c(const void *data, size_t n);
/* TFRecord's mask: rotate right by 15 and add 0xa282ead8, so that a CRC of
 * data that itself holds CRCs does not collapse. */
uint32_t crc32c_mask(uint32_t crc);

#endif
