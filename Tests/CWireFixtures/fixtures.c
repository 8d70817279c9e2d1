#include "CWireFixtures.h"
int cwf_placeholder(void) { return 0; }
