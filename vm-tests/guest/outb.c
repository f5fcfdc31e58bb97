/* SPDX-License-Identifier: Apache-2.0 */
/* Writes one byte to qemu's isa-debug-exit port (0xf4): qemu exits with (byte << 1) | 1.
 * The Debian cloud kernels have no /dev/port, so a static helper does it with ioperm. */
#include <stdlib.h>
#include <sys/io.h>

int main(int argc, char **argv)
{
	if (argc != 2 || ioperm(0xf4, 4, 1) != 0)
		return 1;
	outb((unsigned char)atoi(argv[1]), 0xf4);
	return 0;
}
