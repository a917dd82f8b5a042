#!/usr/bin/env python3
"""Sends Live Activity pushes with aioapns (PyPI `aioapns`), a client nobody here wrote, to an
APNs-style endpoint on localhost, one after another in the order given (a phone applies them in
order), and prints every result as a JSON list: [{"token", "successful", "status", "description"}].

Usage: aioapns-liveactivity.py PORT CA_PEM KEY_P8 KEY_ID TEAM_ID PUSHES_JSON
PUSHES_JSON: [{"token", "topic", "priority", "payload"}, …]; apns-push-type is liveactivity.
"""
import asyncio
import json
import ssl
import sys
import uuid

import aioapns.connection
from aioapns import APNs, NotificationRequest, PushType

port, ca, key, key_id, team_id, pushes = sys.argv[1:7]
# aioapns connects to Apple's host on 443; the stand-in listens on localhost:PORT.
aioapns.connection.APNsDevelopmentClientProtocol.APNS_SERVER = "localhost"
aioapns.connection.APNsDevelopmentClientProtocol.APNS_PORT = int(port)


async def main():
    context = ssl.create_default_context(cafile=ca)
    client = APNs(key=open(key).read(), key_id=key_id, team_id=team_id, topic="unused", use_sandbox=True, ssl_context=context,
                  max_connection_attempts=2)
    results = []
    for push in json.loads(pushes):
        request = NotificationRequest(device_token=push["token"], notification_id=str(uuid.uuid4()), message=push["payload"],
                                      push_type=PushType.LIVEACTIVITY, priority=push["priority"], apns_topic=push["topic"])
        result = await asyncio.wait_for(client.send_notification(request), timeout=30)
        results.append({"token": push["token"], "successful": result.is_successful, "status": result.status,
                        "description": result.description})
    print(json.dumps(results))


asyncio.run(main())
