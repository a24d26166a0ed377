#include "textflag.h"

// func prefetchSlot(p *idSlot)
TEXT ·prefetchSlot(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET
