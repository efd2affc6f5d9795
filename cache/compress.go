package cache

import (
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Large entries are stored in Redis compressed (docs/cache.md, "Size of values"): a
// listing's encoding repeats its field names and DN suffixes on every object, so
// zstd at its fastest level keeps a fraction of it, and the 64 MiB a stored value may
// take holds far more members. It is a matter of the stored form only: the first
// level keeps entries decoded, as before.
//
//	magic "dgz1", the encoded entry's length as a uvarint, then zstd's frame.

// compressAbove is the encoded size from which an entry is compressed: below it the
// saving is a few hundred kilobytes at most, not worth a compression per fill and a
// decompression per read from Redis.
const compressAbove = 1 << 20

// maxUnpacked bounds what one stored value may decompress to. Values are sealed, so
// only dirgate's own reach here; the bound keeps a corrupt length from allocating.
const maxUnpacked = 1 << 30

const magicCompressed = "dgz1"

var (
	zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxUnpacked))
)

// pack returns the form of an encoded entry stored in Redis.
func pack(blob string) string {
	if len(blob) <= compressAbove {
		return blob
	}
	out := make([]byte, 0, len(magicCompressed)+binary.MaxVarintLen64+len(blob)/4)
	out = append(out, magicCompressed...)
	out = binary.AppendUvarint(out, uint64(len(blob)))
	return string(zstdEncoder.EncodeAll([]byte(blob), out))
}

// unpack returns the encoded entry a stored value holds.
func unpack(v string) (string, error) {
	if len(v) < len(magicCompressed) || v[:len(magicCompressed)] != magicCompressed {
		return v, nil
	}
	n, k := binary.Uvarint([]byte(v[len(magicCompressed):min(len(v), len(magicCompressed)+binary.MaxVarintLen64)]))
	if k <= 0 || n > maxUnpacked {
		return "", fmt.Errorf("%w: compressed entry's length", errCorrupt)
	}
	out, err := zstdDecoder.DecodeAll([]byte(v[len(magicCompressed)+k:]), make([]byte, 0, n))
	if err != nil || uint64(len(out)) != n {
		return "", fmt.Errorf("%w: compressed entry: %v", errCorrupt, err)
	}
	return string(out), nil
}
