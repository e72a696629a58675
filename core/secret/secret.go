// Package secret seals the secrets core must be able to read back (B2B
// client secrets, webhook secrets) with a master key held outside the
// database, so a copy of the bbolt file alone reveals none of them.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// Box seals and opens secrets with AES-256-GCM.
type Box struct{ aead cipher.AEAD }

// New returns a Box keyed by masterKeyHex, 64 hex digits (32 bytes).
func New(masterKeyHex string) (*Box, error) {
	key, err := hex.DecodeString(masterKeyHex)
	if err != nil || len(key) != 32 {
		return nil, errors.New("master key must be 64 hex digits (32 bytes)")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext; the result holds a random nonce and the sealed
// text. label binds the secret to its owner, so a sealed value copied to
// another record does not open there.
func (b *Box) Seal(plaintext, label string) []byte {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return b.aead.Seal(nonce, nonce, []byte(plaintext), []byte(label))
}

// Open decrypts what Seal produced for the same label.
func (b *Box) Open(sealed []byte, label string) (string, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("secret: sealed value too short")
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], []byte(label))
	if err != nil {
		return "", fmt.Errorf("secret: cannot open (wrong master key?): %w", err)
	}
	return string(plain), nil
}

// ClientLabel is the label a B2B client's secret is sealed with: its key's
// digest, so the sealed secret opens only in that client's record.
func ClientLabel(keyDigest string) string { return "b2b/" + keyDigest }

// WebhookLabel is the label a branch's webhook secret is sealed with.
func WebhookLabel(branchID string) string { return "webhook/" + branchID }
