#include "textflag.h"

// func prefetchSlot(p *idSlot)
TEXT ·prefetchSlot(SB), NOSPLIT|NOFRAME, $0-8
	MOVD p+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET
