package hostile

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// signInCase is one hostile sign-in body.
type signInCase struct {
	name, contentType, body, param string
	want                           int
}

func signInCases() []signInCase {
	long := strings.Repeat("a", 1100)
	return []signInCase{
		{"wrong content type", "text/plain", `{"username":"a@corp.example.com","password":"x"}`, "", 415},
		{"over the bound", "", `{"username":"a@corp.example.com","password":"` + strings.Repeat("x", 40<<10) + `"}`, "", 413},
		{"malformed JSON", "", `{"username":"a@corp.example.com","password":`, "body", 400},
		{"an array", "", `["a@corp.example.com","x"]`, "body", 400},
		{"username twice", "", `{"username":"a@corp.example.com","UserName":"b@corp.example.com","password":"x"}`, "username", 400},
		{"NUL in the name", "", `{"username":"adm\u0000in@corp.example.com","password":"x"}`, "username", 400},
		{"overlong name", "", `{"username":"` + long + `@corp.example.com","password":"x"}`, "username", 400},
		{"overlong password", "", `{"username":"a@corp.example.com","password":"` + long + `"}`, "password", 400},
		{"a DN", "", `{"username":"CN=Administrator,CN=Users,DC=corp,DC=example,DC=com","password":"x"}`, "username", 400},
		{"filter metacharacters (UPN)", "", `{"username":"*)(|(objectClass=*@corp.example.com","password":"x"}`, "username", 400},
		{"filter metacharacters (down-level)", "", `{"username":"CORP\\*)(cn=*","password":"x"}`, "username", 400},
		{"DN metacharacters", "", `{"username":"a,cn=b@corp.example.com","password":"x"}`, "username", 400},
		{"a bare name", "", `{"username":"Administrator","password":"x"}`, "username", 400},
		{"lone surrogate", "", `{"username":"a\udc00@corp.example.com","password":"x"}`, "username", 400},
	}
}

// TestHostileSignIn: every hostile sign-in is a 4xx in the error shape and sends no
// byte to the DC; a plausible wrong password, the control, does reach it.
func TestHostileSignIn(t *testing.T) {
	targets(t, func(t *testing.T, e *target) {
		create := strings.TrimSuffix(e.p.Base, "/api/directoryObjects/groupMembers") + "/api/authSessions/create"
		post := func(ctype, body string) (int64, func(want []int, param string, noLDAP bool)) {
			sent := e.sentUp()
			req, err := http.NewRequestWithContext(context.Background(), "POST", create, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if ctype == "" {
				ctype = "application/json"
			}
			req.Header.Set("Content-Type", ctype)
			r := client.Send(req)
			return sent, func(want []int, param string, noLDAP bool) { judge(t, e, r, sent, want, param, noLDAP, nil) }
		}
		for _, tc := range signInCases() {
			t.Run(tc.name, func(t *testing.T) {
				_, check := post(tc.contentType, tc.body)
				check([]int{tc.want}, tc.param, true)
			})
		}
		if e.px != nil {
			sent, check := post("", `{"username":"nobody-hostile@corp.example.com","password":"Wrong-1"}`)
			check([]int{403}, "", false)
			if e.sentUp() == sent {
				t.Error("a well-formed sign-in sent nothing to the DC: the byte counter proves nothing")
			}
		}
	})
}
