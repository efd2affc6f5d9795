module github.com/go-asn1-ber/asn1-ber

go 1.13
