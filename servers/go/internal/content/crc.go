package content

// CRC-32 combination: chunks of an upload may arrive in any order, so each
// chunk's CRC is computed when it arrives and the file's CRC is combined at
// commit from the chunk CRCs, without reading the stored bytes again; and a
// generated file's CRC is combined from its seed's block CRCs
// (PROTOCOL.md, "Generated content").
//
// Polynomials are in the reflected representation hash/crc32 uses: bit 31
// is the coefficient of x^0, bit 0 that of x^31.

const (
	reflectedPoly = 0xedb88320 // IEEE polynomial, reflected
	xPow0         = 1 << 31    // the polynomial 1
	xPow8         = 1 << 23    // the polynomial x^8: one zero byte
)

// mulModP multiplies two polynomials modulo the CRC polynomial.
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(xPow0); m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		// b *= x (mod P): in reflected form a right shift, reducing on carry.
		if b&1 != 0 {
			b = b>>1 ^ reflectedPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n returns x^(8n) mod P, the effect of n zero bytes on a CRC register.
func xPow8n(n uint64) uint32 {
	result := uint32(xPow0)
	sq := uint32(xPow8)
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			result = mulModP(sq, result)
		}
		sq = mulModP(sq, sq)
	}
	return result
}

// CombineCRC returns the CRC-32 of A‖B from crcA = CRC(A), crcB = CRC(B) and
// lenB = len(B).
func CombineCRC(crcA, crcB uint32, lenB uint64) uint32 {
	return ShiftFor(lenB).Combine(crcA, crcB)
}

// CRCShift is x^(8n) mod P for one length n. Combining many pieces of the
// same length (the 1 MiB blocks of generated content) computes it once
// instead of once per piece.
type CRCShift uint32

// ShiftFor returns the shift that appends n bytes.
func ShiftFor(n uint64) CRCShift { return CRCShift(xPow8n(n)) }

// Combine returns the CRC-32 of A‖B from crcA = CRC(A) and crcB = CRC(B),
// where len(B) is the length s was made for.
func (s CRCShift) Combine(crcA, crcB uint32) uint32 {
	return mulModP(uint32(s), crcA) ^ crcB
}
