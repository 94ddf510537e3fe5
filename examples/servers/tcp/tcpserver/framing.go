package tcpserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Framing delimits the envelope frames of a connection, both ways, as a
// tcp call template's framing_strategy does (docs/transports.md, tcp).
// The zero value is newline-delimited frames.
type Framing struct {
	// PrefixBytes, when not 0, selects length_prefix framing: each frame
	// is an unsigned length of PrefixBytes bytes (1, 2, 4 or 8), then that
	// many bytes. 0 selects delimiter framing.
	PrefixBytes int
	// LittleEndian writes and reads the length prefix little-endian;
	// the default is big-endian.
	LittleEndian bool
	// Delimiter ends each frame of delimiter framing; empty means "\n".
	Delimiter string
}

// errTooLarge is returned for a frame over the size limit, or over what
// the length prefix can announce.
var errTooLarge = errors.New("frame too large")

// check reports a Framing that cannot be used.
func (fr Framing) check() error {
	switch fr.PrefixBytes {
	case 0, 1, 2, 4, 8:
		return nil
	}
	return fmt.Errorf("tcpserver: PrefixBytes %d is not 0, 1, 2, 4 or 8", fr.PrefixBytes)
}

func (fr Framing) delimiter() []byte {
	if fr.Delimiter == "" {
		return []byte("\n")
	}
	return []byte(fr.Delimiter)
}

// appendFrame appends payload, framed, to dst. A payload longer than
// the length prefix can say, or holding the delimiter, is refused.
func (fr Framing) appendFrame(dst, payload []byte) ([]byte, error) {
	n := fr.PrefixBytes
	if n == 0 {
		delim := fr.delimiter()
		if bytes.Contains(payload, delim) {
			return nil, errors.New("the frame holds the delimiter")
		}
		return append(append(dst, payload...), delim...), nil
	}
	size := uint64(len(payload))
	if n < 8 && size >= 1<<(8*n) {
		return nil, errTooLarge
	}
	for i := range n {
		shift := 8 * (n - 1 - i) // big-endian: the most significant byte first
		if fr.LittleEndian {
			shift = 8 * i
		}
		dst = append(dst, byte(size>>shift))
	}
	return append(dst, payload...), nil
}

// readFrame reads one frame of at most max bytes from r. At a clean end
// of the connection (between frames) it returns io.EOF; a frame cut
// short returns io.ErrUnexpectedEOF; a frame over max returns
// errTooLarge, having held at most max bytes (plus the delimiter) of it.
func (fr Framing) readFrame(r *bufio.Reader, max int) ([]byte, error) {
	if fr.PrefixBytes == 0 {
		return fr.readDelimited(r, max)
	}
	var prefix [8]byte
	n := fr.PrefixBytes
	if _, err := io.ReadFull(r, prefix[:n]); err != nil {
		return nil, err // io.EOF before the first byte, io.ErrUnexpectedEOF within
	}
	var size uint64
	for i := range n {
		b := prefix[i] // big-endian: the most significant byte first
		if fr.LittleEndian {
			b = prefix[n-1-i]
		}
		size = size<<8 | uint64(b)
	}
	if size > uint64(max) {
		return nil, errTooLarge
	}
	frame := make([]byte, size)
	if _, err := io.ReadFull(r, frame); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return frame, nil
}

func (fr Framing) readDelimited(r *bufio.Reader, max int) ([]byte, error) {
	delim := fr.delimiter()
	last := delim[len(delim)-1]
	var frame []byte
	for {
		part, err := r.ReadSlice(last)
		frame = append(frame, part...)
		if len(frame) > max+len(delim) {
			return nil, errTooLarge
		}
		switch {
		case err == nil:
			// Every delimiter ends in last, so the first one ends the
			// frame at the first last byte where frame ends with it.
			if payload, ok := bytes.CutSuffix(frame, delim); ok {
				if len(payload) > max {
					return nil, errTooLarge
				}
				return payload, nil
			}
		case errors.Is(err, bufio.ErrBufferFull):
			// The frame goes on past the reader's buffer.
		case errors.Is(err, io.EOF) && len(frame) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}
