package dirgate.authz_test

import data.dirgate.authz

# Fixtures: a caller in the help desk, nested in IT Support; objects of the demo
# organisation.

helpdesk := {
	"dn": "CN=Hugo Helpdesk,OU=IT,OU=Staff,DC=corp,DC=example,DC=com",
	"guid": "73e0a89b-84f0-4f42-8cbd-40e4e51f1673",
	"sid": "S-1-5-21-2113472910-3286130475-1853229740-1125",
	"displayName": "Hugo Helpdesk",
	"groups": [
		{
			"dn": "CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com",
			"guid": "54eb12b6-fd0c-491e-88d0-8fa7ba12b04b",
			"sid": "S-1-5-21-2113472910-3286130475-1853229740-1153",
		},
		{
			"dn": "CN=IT Department,OU=Groups,DC=corp,DC=example,DC=com",
			"guid": "ff4cee22-f1ad-414f-ad9d-6a2793db8829",
			"sid": "S-1-5-21-2113472910-3286130475-1853229740-1155",
		},
		{
			"dn": "CN=Workstation Admins,OU=Groups,DC=corp,DC=example,DC=com",
			"guid": "68e35bb4-6a37-4331-b66b-0b5eaf174e00",
			"sid": "S-1-5-21-2113472910-3286130475-1853229740-1157",
		},
	],
}

admin := {
	"dn": "CN=Dana Admin,OU=IT,OU=Staff,DC=corp,DC=example,DC=com",
	"guid": "0b6f39b4-9d4c-4d4f-b1a4-1bb2d5c7e6a0",
	"sid": "",
	"displayName": "Dana Admin",
	"groups": [{
		"dn": "CN=Directory Admins,OU=Groups,DC=corp,DC=example,DC=com",
		"guid": "9ada8d98-d1c6-4903-a144-0654771cd9a2",
		"sid": "S-1-5-21-2113472910-3286130475-1853229740-1156",
	}],
}

nobody := {"dn": "CN=Bella Hughes,OU=Sales,OU=Staff,DC=corp,DC=example,DC=com", "guid": "", "sid": "", "displayName": "Bella Hughes", "groups": []}

directory_object(dn, type) := {
	"guid": "00000000-0000-0000-0000-000000000001", "dn": dn, "displayName": "x",
	"objectType": type, "objectTypeCode": 0, "domainName": "corp.example.com",
	"directoryType": 1, "properties": {},
}

user := directory_object("CN=Hazel Zhou,OU=HR,OU=Staff,DC=corp,DC=example,DC=com", "user")

computer := directory_object("CN=WS-0001,OU=Workstations,DC=corp,DC=example,DC=com", "computer")

contact := directory_object("CN=Acme Support,OU=Contacts,DC=corp,DC=example,DC=com", "contact")

it_group := directory_object("CN=Directory Admins,OU=Groups,DC=corp,DC=example,DC=com", "group")

newsletter := object.union(
	directory_object("CN=Newsletter,OU=Groups,DC=corp,DC=example,DC=com", "group"),
	{"guid": "e2fafa62-2fd5-441f-be0b-2d2f35feb898"},
)

removal_test := object.union(
	directory_object("CN=Removal Test,OU=Groups,DC=corp,DC=example,DC=com", "group"),
	{"guid": "015f70b0-0a3a-41ec-847b-dd932d60c880"},
)

finance := directory_object("CN=Finance Team,OU=Groups,DC=corp,DC=example,DC=com", "group")

request := {"includeIndirect": false, "properties": [], "sizeLimit": 0}

view(subject, obj, group) := {"action": "view", "subject": subject, "object": obj, "group": group, "request": request}

remove(subject, obj, group) := {"action": "remove", "subject": subject, "object": obj, "group": group, "request": request}

add(subject, obj, group) := {"action": "add", "subject": subject, "object": obj, "group": group, "request": request}

# The demo roles (data.json).

test_admin_views_everything if {
	every obj in [user, computer, contact, it_group] {
		authz.allow with input as view(admin, obj, finance)
	}
}

test_admin_removes_everything if {
	every obj in [user, computer, contact, it_group] {
		authz.allow with input as remove(admin, obj, finance)
	}
}

test_admin_adds_everything if {
	every obj in [user, computer, contact, it_group] {
		authz.allow with input as add(admin, obj, finance)
	}
}

test_helpdesk_adds_to_the_newsletter_and_the_removal_test_group if {
	authz.allow with input as add(helpdesk, user, newsletter)
	authz.allow with input as add(helpdesk, contact, newsletter)
	authz.allow with input as add(helpdesk, user, removal_test)
}

test_helpdesk_does_not_add_to_other_groups_or_add_groups if {
	not authz.allow with input as add(helpdesk, user, finance)
	not authz.allow with input as add(helpdesk, it_group, newsletter)
}

mixed_members := directory_object("CN=Mixed Members,OU=Groups,DC=corp,DC=example,DC=com", "group")

directory_admins := directory_object("CN=Directory Admins,OU=Groups,DC=corp,DC=example,DC=com", "group")

test_workstation_admins_add_computers_to_mixed_members_only if {
	authz.allow with input as add(helpdesk, computer, mixed_members)
	not authz.allow with input as add(helpdesk, computer, finance)
	not authz.allow with input as add(helpdesk, computer, directory_admins)
}

test_viewing_or_removing_does_not_grant_adding if {
	not authz.allow with input as add(helpdesk, user, finance)
		with data.dirgate.roles as [object.union(role(helpdesk.dn, {"all": true}, []), {"permissions": ["view", "remove"]})]
	not authz.allow with input as add(nobody, user, newsletter)
}

test_helpdesk_views_staff_users_and_workstations if {
	authz.allow with input as view(helpdesk, user, finance)
	authz.allow with input as view(helpdesk, computer, finance)
}

test_helpdesk_views_groups_through_nested_membership if {
	authz.allow with input as view(helpdesk, it_group, finance)
}

test_helpdesk_does_not_view_contacts if {
	not authz.allow with input as view(helpdesk, contact, finance)
}

test_helpdesk_does_not_view_a_user_outside_staff if {
	not authz.allow with input as view(helpdesk, directory_object("CN=Guest,CN=Users,DC=corp,DC=example,DC=com", "user"), finance)
}

test_helpdesk_removes_from_the_newsletter_by_dn if {
	authz.allow with input as remove(helpdesk, user, newsletter)
	authz.allow with input as remove(helpdesk, contact, newsletter)
}

test_helpdesk_removes_from_the_removal_test_group_by_guid if {
	authz.allow with input as remove(helpdesk, user, removal_test)
}

test_helpdesk_does_not_remove_from_other_groups if {
	not authz.allow with input as remove(helpdesk, user, finance)
}

test_helpdesk_does_not_remove_groups_from_the_newsletter if {
	not authz.allow with input as remove(helpdesk, it_group, newsletter)
}

test_workstation_admins_remove_computers_anywhere if {
	authz.allow with input as remove(helpdesk, computer, finance)
}

test_viewing_does_not_grant_removal if {
	not authz.allow with input as remove(helpdesk, directory_object("CN=Ada,OU=IT,OU=Staff,DC=corp,DC=example,DC=com", "user"), finance)
}

test_a_caller_without_roles_gets_nothing if {
	not authz.allow with input as view(nobody, user, finance)
	not authz.allow with input as remove(nobody, user, newsletter)
}

# The role mechanics, each with its own roles.

role(trustee, scope, types) := {"name": "r", "trustees": [trustee], "permissions": ["view"], "scopes": [scope], "objectTypes": types}

staff := {"subtree": "OU=Staff,DC=corp,DC=example,DC=com"}

test_trustee_by_user_dn_in_any_case if {
	authz.allow with input as view(helpdesk, user, finance)
		with data.dirgate.roles as [role("cn=HUGO HELPDESK,ou=it,ou=staff,dc=corp,dc=example,dc=com", staff, [])]
}

test_trustee_by_group_sid if {
	authz.allow with input as view(helpdesk, user, finance)
		with data.dirgate.roles as [role("S-1-5-21-2113472910-3286130475-1853229740-1153", staff, [])]
}

test_trustee_by_group_guid_in_braces if {
	authz.allow with input as view(helpdesk, user, finance)
		with data.dirgate.roles as [role("{54EB12B6-FD0C-491E-88D0-8FA7BA12B04B}", staff, [])]
}

test_empty_identifiers_match_no_trustee if {
	not authz.allow with input as view(admin, user, finance)
		with data.dirgate.roles as [role("", staff, [])]
}

test_permission_must_match_the_action if {
	not authz.allow with input as remove(helpdesk, user, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"all": true}, [])]
}

test_subtree_is_below_the_base_only if {
	not authz.allow with input as view(helpdesk, directory_object("OU=Staff,DC=corp,DC=example,DC=com", "organizationalUnit"), finance)
		with data.dirgate.roles as [role(helpdesk.dn, staff, [])]
}

test_subtree_does_not_match_a_sibling_ending_alike if {
	not authz.allow with input as view(helpdesk, directory_object("CN=x,OU=NotStaff,DC=corp,DC=example,DC=com", "user"), finance)
		with data.dirgate.roles as [role(helpdesk.dn, staff, [])]
}

test_subtree_ignores_an_escaped_comma if {
	# The CN is "x,OU=Staff" and the object sits at the domain root.
	not authz.allow with input as view(helpdesk, directory_object(`CN=x\,OU=Staff,DC=corp,DC=example,DC=com`, "user"), finance)
		with data.dirgate.roles as [role(helpdesk.dn, staff, [])]
}

test_subtree_accepts_an_escaped_backslash_before_the_separator if {
	# The CN is "x\" and the object is in OU=Staff.
	authz.allow with input as view(helpdesk, directory_object(`CN=x\\,OU=Staff,DC=corp,DC=example,DC=com`, "user"), finance)
		with data.dirgate.roles as [role(helpdesk.dn, staff, [])]
}

test_members_of_scope_is_the_listed_group if {
	authz.allow with input as view(helpdesk, contact, newsletter)
		with data.dirgate.roles as [role(helpdesk.dn, {"membersOf": ["cn=newsletter,ou=groups,dc=corp,dc=example,dc=com"]}, [])]
	not authz.allow with input as view(helpdesk, contact, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"membersOf": ["cn=newsletter,ou=groups,dc=corp,dc=example,dc=com"]}, [])]
}

test_object_types_limit_a_role if {
	authz.allow with input as view(helpdesk, user, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"all": true}, ["user"])]
	not authz.allow with input as view(helpdesk, computer, finance)
		with data.dirgate.roles as [role(helpdesk.dn, {"all": true}, ["user"])]
}

test_no_roles_no_access if {
	not authz.allow with input as view(admin, user, finance) with data.dirgate.roles as []
}

# explain: the caller may see the explored principal's decisions (the decisions API).
explain(subject, explored, group) := {"action": "explain", "subject": subject, "object": explored, "group": group, "request": request}

test_admin_explains_anyone if {
	authz.allow with input as explain(admin, helpdesk, mixed_members)
}

test_helpdesk_does_not_explain if {
	not authz.allow with input as explain(helpdesk, admin, mixed_members)
	not authz.allow with input as explain(helpdesk, helpdesk, mixed_members)
}

test_reasons_name_the_role_and_scope if {
	r := authz.reasons with input as view(helpdesk, computer, finance)
	r == {`role help-desk-people, scope {"subtree":"OU=Workstations,DC=corp,DC=example,DC=com"}`}
}

test_no_reasons_when_denied if {
	count(authz.reasons) == 0 with input as view(helpdesk, contact, finance)
}

# The property rule: the help desk reads every attribute that is not secret of
# what it views ("*"), the directory admins also the LAPS passwords they name;
# a caller that may not view an object reads nothing of it.

test_helpdesk_reads_public_properties_of_what_it_views if {
	authz.properties == {"*"} with input as view(helpdesk, computer, finance)
}

test_admin_names_the_laps_and_linked_attributes if {
	authz.properties == {
		"*", "ms-mcs-admpwd", "mslaps-password",
		"member", "memberof", "manager", "directreports", "managedby", "managedobjects",
		"primarygroupid", "ms-ds-creatorsid",
	} with input as view(admin, computer, finance)
}

# The help desk views users and groups, but not every object their memberOf or
# manager names: its roles name no attribute that names other objects, so "*" alone
# leaves them out.
test_helpdesk_reads_no_linked_attributes if {
	not "memberof" in authz.properties with input as view(helpdesk, user, finance)
	not "manager" in authz.properties with input as view(helpdesk, user, finance)
}

test_no_properties_without_the_view if {
	authz.properties == set() with input as view(nobody, computer, finance)
	authz.properties == set() with input as view(helpdesk, contact, finance)
}

test_a_role_names_its_properties if {
	roles := [{
		"name": "laps-readers", "trustees": ["CN=Help Desk,OU=Groups,DC=corp,DC=example,DC=com"],
		"permissions": ["view"], "scopes": [{"subtree": "OU=Workstations,DC=corp,DC=example,DC=com"}],
		"objectTypes": ["computer"], "properties": ["ms-Mcs-AdmPwd"],
	}]
	authz.properties == {"ms-mcs-admpwd"} with input as view(helpdesk, computer, finance) with data.dirgate.roles as roles
	authz.properties == set() with input as view(helpdesk, user, finance) with data.dirgate.roles as roles
}
