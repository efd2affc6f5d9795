module github.com/dirgate/dirgate

go 1.26.0

require (
	github.com/go-ldap/ldap/v3 v3.4.15
	github.com/go-ldap/ldif v0.0.0-20250910174327-aa3bc3095c92
	golang.org/x/sync v0.24.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/Azure/go-ntlmssp v0.1.1 // indirect
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	github.com/go-asn1-ber/asn1-ber v1.5.8 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/sony/gobreaker/v2 v2.4.0
	github.com/stretchr/testify v1.8.4 // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
