// The official emulator's connection string (UseDevelopmentEmulator=true: plain AMQP), unchanged but for
// the port: the Go SDK sends to and receives from a queue its admin package creates (the same string on the
// management port, HTTPS trusting the broker's certificate). See test_go_emulator.py.
package main

import "time"

func emulator(args []string) doc {
	queue := args[0]
	manager := newAdmin(adminConnectionString())
	mustGet(manager.CreateQueue(background, queue, nil))
	client := newClient(connectionString(), nil)
	defer client.Close(background)
	s := sender(client, queue)
	must(s.SendMessage(background, withID("from the Go SDK", "go-1"), nil))
	r := receiver(client, queue, nil)
	message := receiveAll(r, 1, 10*time.Second)[0]
	must(r.CompleteMessage(background, message, nil))
	created := mustGet(manager.GetQueue(background, queue, nil))
	return doc{"body": string(message.Body), "messageId": message.MessageID, "queue": created.QueueName}
}
