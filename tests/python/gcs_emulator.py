"""Runs gcp-storage-emulator (a GCS server) for tests/src/gcs.rs.

    gcs_emulator.py HOST PORT

In memory, on HOST:PORT, until killed. The emulator serves the XML API's
object upload and download (PUT and GET /BUCKET/OBJECT), which is what
object_store's GCS client uses, but leaves out headers the real service
sends and the client requires; they are added here, and nothing else:

- an upload's response carries the object's ETag (the client fails the
  upload without one);
- a download's response carries ETag and Last-Modified (the client fails
  the read without them);
- GET /BUCKET?list-type=2 lists a bucket as the XML API does (the client
  lists through it; the emulator lists through the JSON API only), all
  keys in one page.

Its listen backlog is raised from Python's 5: several rank processes and
a coordinator connect at once, and the server answers one at a time.
"""

import email.utils
import http.server
import logging
import sys
from datetime import datetime, timezone
from http import HTTPStatus
from xml.sax.saxutils import escape

from gcp_storage_emulator import server
from gcp_storage_emulator.exceptions import NotFound
from gcp_storage_emulator.handlers import objects


def object_headers(response, storage, request):
    """Sets ETag and Last-Modified of the request's object, if it exists."""
    bucket, name = request.params["bucket_name"], request.params["object_id"]
    try:
        obj = storage.get_file_obj(bucket, name)
    except Exception:  # noqa: BLE001 - no such object: the handler said so
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


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    patched = {
        objects.xml_upload: with_object_headers(objects.xml_upload),
        objects.download: with_object_headers(objects.download),
    }
    for _, methods in server.HANDLERS:
        for method, handler in methods.items():
            methods[method] = patched.get(handler, handler)
    server.HANDLERS = server.HANDLERS + ((r"^/(?P<bucket_name>[-.\w]+)/?$", {server.GET: xml_list}),)
    http.server.HTTPServer.request_queue_size = 128
    logging.basicConfig(level=logging.CRITICAL)
    server.create_server(host, port, in_memory=True).run()


if __name__ == "__main__":
    main()
