"""Runs gcp-storage-emulator (a GCS server) for tests/src/gcs.rs.

    gcs_emulator.py HOST PORT

In memory, on HOST:PORT, until killed. object_store's GCS client speaks
the XML API (/BUCKET/OBJECT); the emulator serves its plain upload and
download but leaves out the following, which the real service has and the
client requires. They are added here, and nothing else:

- an upload's response carries the object's ETag (the client fails the
  upload without one);
- a download's response carries ETag and Last-Modified (the client fails
  the read without them);
- GET /BUCKET?list-type=2 lists a bucket as the XML API does (the client
  lists through it; the emulator lists through the JSON API only), all
  keys in one page;
- multipart uploads (POST ?uploads, PUT ?partNumber&uploadId, POST
  ?uploadId to complete, DELETE ?uploadId to abort), which the client uses
  for large objects; parts are kept in memory until completed; and DELETE
  of an object.

Its listen backlog is raised from Python's 5: several rank processes and
a coordinator connect at once, and the server answers one at a time.
"""

import email.utils
import hashlib
import http.server
import itertools
import logging
import sys
import xml.etree.ElementTree as ElementTree
from datetime import datetime, timezone
from http import HTTPStatus
from urllib.parse import parse_qs, urlparse
from xml.sax.saxutils import escape

from gcp_storage_emulator import server
from gcp_storage_emulator.exceptions import NotFound
from gcp_storage_emulator.handlers import objects


def object_headers(response, storage, request):
    """Sets ETag and Last-Modified of the request's object, if it exists."""
    bucket, name = request.params["bucket_name"], request.params["object_id"]
    try:
        obj = storage.get_file_obj(bucket, name)
    except NotFound:  # the handler has answered 404
        return
    response["ETag"] = '"{}"'.format(obj["generation"])
    updated = datetime.strptime(obj["updated"], "%Y-%m-%dT%H:%M:%S.%fZ")
    response["Last-Modified"] = email.utils.format_datetime(
        updated.replace(tzinfo=timezone.utc), usegmt=True
    )


def with_object_headers(handler):
    def wrapped(request, response, storage, *args, **kwargs):
        handler(request, response, storage, *args, **kwargs)
        object_headers(response, storage, request)

    return wrapped


def xml_list(request, response, storage, *args, **kwargs):
    """ListObjectsV2, as GCS's XML API answers it."""

    def arg(name):
        values = request.query.get(name)
        return values[0] if values else None

    bucket = request.params["bucket_name"]
    prefix, start_after = arg("prefix"), arg("start-after")
    try:
        files, prefixes = storage.get_file_list(bucket, prefix, arg("delimiter"))
    except NotFound:
        response.status = HTTPStatus.NOT_FOUND
        return
    parts = ['<?xml version="1.0" encoding="UTF-8"?>', "<ListBucketResult>"]
    parts.append("<Name>{}</Name>".format(escape(bucket)))
    for obj in sorted(files, key=lambda o: o["name"]):
        if start_after is not None and obj["name"] <= start_after:
            continue
        parts.append(
            "<Contents><Key>{}</Key><Size>{}</Size><LastModified>{}</LastModified>"
            '<ETag>"{}"</ETag></Contents>'.format(
                escape(obj["name"]), obj["size"], obj["updated"], obj["generation"]
            )
        )
    for common in sorted(prefixes):
        parts.append("<CommonPrefixes><Prefix>{}</Prefix></CommonPrefixes>".format(escape(common)))
    parts.append("</ListBucketResult>")
    response.write_file("".join(parts), content_type="application/xml")


# Multipart uploads in progress: id -> (bucket, name, {part number: bytes}).
UPLOADS = {}
UPLOAD_IDS = itertools.count(1)


def raw_query(request):
    """The query, blank values kept (`?uploads=`)."""
    return parse_qs(urlparse(request.full_url).query, keep_blank_values=True)


def part_etag(data):
    return '"{}"'.format(hashlib.md5(data).hexdigest())


def xml_put(request, response, storage, *args, **kwargs):
    """A whole object, or one part of a multipart upload."""
    query = raw_query(request)
    if "uploadId" not in query:
        return put_whole(request, response, storage, *args, **kwargs)
    upload = UPLOADS.get(query["uploadId"][0])
    if upload is None:
        response.status = HTTPStatus.NOT_FOUND
        return
    data = request.data or b""
    upload[2][int(query["partNumber"][0])] = data
    response["ETag"] = part_etag(data)


def xml_post(request, response, storage, *args, **kwargs):
    """Starts (?uploads) or completes (?uploadId) a multipart upload."""
    query = raw_query(request)
    bucket, name = request.params["bucket_name"], request.params["object_id"]
    if "uploads" in query:
        upload_id = "upload-{}".format(next(UPLOAD_IDS))
        UPLOADS[upload_id] = (bucket, name, {})
        response.write_file(
            '<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult>'
            "<Bucket>{}</Bucket><Key>{}</Key><UploadId>{}</UploadId>"
            "</InitiateMultipartUploadResult>".format(escape(bucket), escape(name), upload_id),
            content_type="application/xml",
        )
        return
    upload = UPLOADS.pop(query.get("uploadId", [""])[0], None)
    if upload is None or upload[:2] != (bucket, name):
        response.status = HTTPStatus.NOT_FOUND
        return
    parts = upload[2]
    chunks = []
    for part in ElementTree.fromstring(request.data).iter("Part"):
        number = int(part.findtext("PartNumber"))
        if number not in parts or part.findtext("ETag") != part_etag(parts[number]):
            response.status = HTTPStatus.BAD_REQUEST
            return
        chunks.append(parts[number])
    data = b"".join(chunks)
    obj = objects._make_object_resource(
        request.base_url, bucket, name, "application/octet-stream", str(len(data))
    )
    storage.create_file(bucket, name, data, objects._checksums(data, obj))
    response.write_file(
        '<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult>'
        '<Bucket>{}</Bucket><Key>{}</Key><ETag>"{}"</ETag>'
        "</CompleteMultipartUploadResult>".format(
            escape(bucket), escape(name), storage.get_file_obj(bucket, name)["generation"]
        ),
        content_type="application/xml",
    )


def xml_delete(request, response, storage, *args, **kwargs):
    """Aborts a multipart upload (?uploadId), or deletes the object."""
    query = raw_query(request)
    if "uploadId" in query:
        UPLOADS.pop(query["uploadId"][0], None)
        response.status = HTTPStatus.NO_CONTENT
        return
    objects.delete(request, response, storage, *args, **kwargs)


put_whole = with_object_headers(objects.xml_upload)


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    for _, methods in server.HANDLERS:
        if methods.get(server.PUT) is objects.xml_upload:
            methods.update({server.PUT: xml_put, server.POST: xml_post, server.DELETE: xml_delete})
        if methods.get(server.GET) is objects.download:
            methods[server.GET] = with_object_headers(objects.download)
    bucket = r"^/(?P<bucket_name>[-.\w]+)/?$"
    server.HANDLERS = server.HANDLERS + ((bucket, {server.GET: xml_list}),)
    http.server.HTTPServer.request_queue_size = 128
    logging.basicConfig(level=logging.CRITICAL)
    server.create_server(host, port, in_memory=True).run()


if __name__ == "__main__":
    main()
