package load

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// decoders undo the content codings dirgate answers in, each made on first use and
// reused by one worker.
type decoders struct {
	gz *gzip.Reader
	zs *zstd.Decoder
}

// decode appends the decoding of b (in coding enc) to dst.
func (d *decoders) decode(enc string, b, dst []byte) ([]byte, error) {
	switch enc {
	case "gzip":
		var err error
		if d.gz == nil {
			d.gz, err = gzip.NewReader(bytes.NewReader(b))
		} else {
			err = d.gz.Reset(bytes.NewReader(b))
		}
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		buf := bytes.NewBuffer(dst)
		if _, err := io.Copy(buf, d.gz); err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		return buf.Bytes(), nil
	case "zstd":
		if d.zs == nil {
			var err error
			if d.zs, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1)); err != nil {
				return nil, fmt.Errorf("zstd: %w", err)
			}
		}
		out, err := d.zs.DecodeAll(b, dst)
		if err != nil {
			return nil, fmt.Errorf("zstd body: %w", err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("answer in content coding %q, which was not asked for", enc)
}

func (d *decoders) close() {
	if d.zs != nil {
		d.zs.Close()
	}
}
