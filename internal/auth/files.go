package auth

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"time"
)

// MaxSettingFileBytes bounds the files that settings name (tokens, secrets, certificates):
// far larger than any real one, so that naming the wrong file (a log, /dev/zero) is an error
// at once rather than memory spent without bound.
const MaxSettingFileBytes = 1 << 20

// ReadSettingFile reads a file that a setting names, whole, up to MaxSettingFileBytes.
func ReadSettingFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSettingFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSettingFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a setting file", path, MaxSettingFileBytes)
	}
	return b, nil
}

// LoadKeyPair is tls.LoadX509KeyPair with ReadSettingFile's bound.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	cert, err := ReadSettingFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ReadSettingFile(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}

// FileCheckInterval is how often Tokens.Run and Certificates.Run look at their files again:
// a rotation on disk takes effect within about that.
const FileCheckInterval = time.Second

// watch calls look every FileCheckInterval until ctx ends, then returns nil. It is the loop of
// Tokens.Run and Certificates.Run: files are read there, so that no request or handshake ever
// reads one or waits for one.
func watch(ctx context.Context, look func()) error {
	ticker := time.NewTicker(FileCheckInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			look()
		}
	}
}
