#ifndef C_MALLOC_SHIM_H
#define C_MALLOC_SHIM_H

// glibc's malloc.h (malloc_trim), which Swift's Glibc module does not export.
#include <malloc.h>

#endif
