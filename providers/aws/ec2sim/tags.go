package ec2sim

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"
)

// CreateTags and DeleteTags on instances: the calls of the AWS provider's tagging
// controller (Cloud.TagResource and UntagResource, one resource per call, or several with
// --tagging-controller-enable-batching). As EC2 documents them
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateTags.html,
// API_DeleteTags.html): ResourceId.N names the resources, Tag.N.Key/Tag.N.Value the tags;
// CreateTags adds or overwrites; DeleteTags without Tag.N deletes every tag, a Tag.N with a
// Value deletes the key only while it has that value, one without deletes it whatever its
// value. An unknown instance fails the whole call with InvalidInstanceID.NotFound and
// changes nothing. Both actions take tokens from their own buckets, as every action.

// Tags returns a copy of the instance's tags and whether the instance exists.
func (s *Server) Tags(id string) (map[string]string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	in, ok := s.instances[id]
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(in.Tags))
	for k, v := range in.Tags {
		out[k] = v
	}
	return out, true
}

// tagArg is one Tag.N of a request; hasValue tells Tag.N.Value="" from no Tag.N.Value.
type tagArg struct {
	key, value string
	hasValue   bool
}

func tagArgs(r *http.Request) ([]tagArg, *apiError) {
	var out []tagArg
	for i := 1; ; i++ {
		p := "Tag." + strconv.Itoa(i)
		key, ok := r.Form[p+".Key"]
		if !ok {
			return out, nil
		}
		if key[0] == "" {
			return nil, badRequest("InvalidParameterValue", "Tag key must not be empty (%s.Key)", p)
		}
		if strings.HasPrefix(strings.ToLower(key[0]), "aws:") {
			return nil, badRequest("InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use")
		}
		v, hasValue := r.Form[p+".Value"]
		t := tagArg{key: key[0], hasValue: hasValue}
		if hasValue {
			t.value = v[0]
		}
		out = append(out, t)
	}
}

// tags answers CreateTags (create true) or DeleteTags.
func (s *Server) tags(r *http.Request, create bool) (any, int, *apiError) {
	ids := list(r.Form, "ResourceId")
	if len(ids) == 0 {
		return nil, 0, badRequest("MissingParameter", "The request must contain the parameter resourceIdSet")
	}
	args, err := tagArgs(r)
	if err != nil {
		return nil, 0, err
	}
	if create && len(args) == 0 {
		return nil, 0, badRequest("MissingParameter", "The request must contain the parameter tagSet")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if !instanceIDPattern.MatchString(id) {
			return nil, 0, badRequest("InvalidID", "The ID '%s' is not valid", id)
		}
		if _, ok := s.instances[id]; !ok {
			return nil, 0, badRequest("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
	}
	for _, id := range ids {
		in := s.instances[id]
		// A new map: Put's caller may still hold the old one.
		tags := make(map[string]string, len(in.Tags)+len(args))
		for k, v := range in.Tags {
			tags[k] = v
		}
		switch {
		case create:
			for _, a := range args {
				tags[a.key] = a.value
			}
		case len(args) == 0:
			clear(tags)
		default:
			for _, a := range args {
				if v, ok := tags[a.key]; ok && (!a.hasValue || v == a.value) {
					delete(tags, a.key)
				}
			}
		}
		in.Tags = tags
	}
	name := "DeleteTagsResponse"
	if create {
		name = "CreateTagsResponse"
	}
	return tagsResponse{XMLName: xml.Name{Local: name}, XMLNS: Namespace, RequestID: s.requestID(), Return: true}, len(ids), nil
}

type tagsResponse struct {
	XMLName   xml.Name
	XMLNS     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}
