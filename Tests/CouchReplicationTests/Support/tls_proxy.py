import socket, ssl, sys, threading
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
upstream = int(sys.argv[3])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print(listener.getsockname()[1], flush=True)
def pipe(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except Exception:
        pass
    finally:
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except Exception:
                pass
def handle(client):
    try:
        secure = context.wrap_socket(client, server_side=True)
    except Exception:
        client.close()
        return
    plain = socket.create_connection(("127.0.0.1", upstream))
    threading.Thread(target=pipe, args=(secure, plain), daemon=True).start()
    pipe(plain, secure)
while True:
    client, _ = listener.accept()
    threading.Thread(target=handle, args=(client,), daemon=True).start()
