#!/usr/bin/env python3
"""Sends pushes to an APNs-style endpoint with aioapns (PyPI `aioapns`), a client nobody here
wrote, pointed at the given port on localhost instead of Apple's host. Sends one alert to each
device token concurrently, on its own connections and with its own provider token, and prints
every result as a JSON list: [{"token", "id", "successful", "status", "description"}].

Usage: aioapns-push.py PORT CA_PEM KEY_P8 KEY_ID TEAM_ID TOPIC TOKEN...
"""
import asyncio
import json
import ssl
import sys
import uuid

import aioapns.connection
from aioapns import APNs, NotificationRequest, PushType

port, ca, key, key_id, team_id, topic = sys.argv[1:7]
tokens = sys.argv[7:]
# aioapns connects to Apple's host on 443; the stand-in listens on localhost:PORT.
aioapns.connection.APNsDevelopmentClientProtocol.APNS_SERVER = "localhost"
aioapns.connection.APNsDevelopmentClientProtocol.APNS_PORT = int(port)


async def main():
    context = ssl.create_default_context(cafile=ca)
    client = APNs(key=open(key).read(), key_id=key_id, team_id=team_id, topic=topic, use_sandbox=True, ssl_context=context,
                  max_connection_attempts=2)
    requests = [NotificationRequest(device_token=token, notification_id=str(uuid.uuid4()),
                                    message={"aps": {"alert": {"title": "Hi", "body": "from aioapns"}, "mutable-content": 1}},
                                    push_type=PushType.ALERT)
                for token in tokens]
    results = await asyncio.wait_for(asyncio.gather(*(client.send_notification(r) for r in requests)), timeout=60)
    print(json.dumps([{"token": q.device_token, "id": r.notification_id, "sentId": q.notification_id,
                       "successful": r.is_successful, "status": r.status, "description": r.description}
                      for q, r in zip(requests, results)]))


asyncio.run(main())
