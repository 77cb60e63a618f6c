package h2server

import (
	"encoding/binary"

	"golang.org/x/net/http2"
)

// The frames the server writes are appended to the connection's outgoing
// buffer by hand: a frame is a 9-byte header and its payload, and writing
// them directly keeps no per-connection frame buffer alive between writes
// (the read side uses http2.Framer, whose HPACK and CONTINUATION handling
// we want).

// frameHeaderLen is the size of an HTTP/2 frame header.
const frameHeaderLen = 9

// appendFrameHeader appends a frame header for a payload of length n.
func appendFrameHeader(b []byte, n int, t http2.FrameType, flags http2.Flags, stream uint32) []byte {
	return append(b,
		byte(n>>16), byte(n>>8), byte(n),
		byte(t), byte(flags),
		byte(stream>>24)&0x7f, byte(stream>>16), byte(stream>>8), byte(stream))
}

// appendData appends one DATA frame carrying p.
func appendData(b []byte, stream uint32, p []byte, end bool) []byte {
	var flags http2.Flags
	if end {
		flags = http2.FlagDataEndStream
	}
	b = appendFrameHeader(b, len(p), http2.FrameData, flags, stream)
	return append(b, p...)
}

// appendHeaders appends a header block as a HEADERS frame and, when it is
// larger than maxFrame, CONTINUATION frames.
func appendHeaders(b []byte, stream uint32, block []byte, end bool, maxFrame int) []byte {
	first := true
	for first || len(block) > 0 {
		chunk := block
		if len(chunk) > maxFrame {
			chunk = chunk[:maxFrame]
		}
		block = block[len(chunk):]
		var flags http2.Flags
		if len(block) == 0 {
			flags |= http2.FlagHeadersEndHeaders
		}
		t := http2.FrameContinuation
		if first {
			t = http2.FrameHeaders
			if end {
				flags |= http2.FlagHeadersEndStream
			}
		}
		b = appendFrameHeader(b, len(chunk), t, flags, stream)
		b = append(b, chunk...)
		first = false
	}
	return b
}

// appendWindowUpdate appends a WINDOW_UPDATE frame (stream 0: the
// connection's window).
func appendWindowUpdate(b []byte, stream uint32, incr uint32) []byte {
	b = appendFrameHeader(b, 4, http2.FrameWindowUpdate, 0, stream)
	return binary.BigEndian.AppendUint32(b, incr&0x7fffffff)
}

// appendRST appends a RST_STREAM frame.
func appendRST(b []byte, stream uint32, code http2.ErrCode) []byte {
	b = appendFrameHeader(b, 4, http2.FrameRSTStream, 0, stream)
	return binary.BigEndian.AppendUint32(b, uint32(code))
}

// appendGoAway appends a GOAWAY frame.
func appendGoAway(b []byte, lastStream uint32, code http2.ErrCode) []byte {
	b = appendFrameHeader(b, 8, http2.FrameGoAway, 0, 0)
	b = binary.BigEndian.AppendUint32(b, lastStream&0x7fffffff)
	return binary.BigEndian.AppendUint32(b, uint32(code))
}

// appendPingAck answers a PING.
func appendPingAck(b []byte, data [8]byte) []byte {
	b = appendFrameHeader(b, 8, http2.FramePing, http2.FlagPingAck, 0)
	return append(b, data[:]...)
}

// appendSettingsAck acknowledges the peer's SETTINGS.
func appendSettingsAck(b []byte) []byte {
	return appendFrameHeader(b, 0, http2.FrameSettings, http2.FlagSettingsAck, 0)
}

// appendSettings appends a SETTINGS frame.
func appendSettings(b []byte, settings ...http2.Setting) []byte {
	b = appendFrameHeader(b, 6*len(settings), http2.FrameSettings, 0, 0)
	for _, s := range settings {
		b = binary.BigEndian.AppendUint16(b, uint16(s.ID))
		b = binary.BigEndian.AppendUint32(b, s.Val)
	}
	return b
}
