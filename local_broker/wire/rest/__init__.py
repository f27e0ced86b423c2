"""Service Bus's REST messaging (send, peek-lock, receive-and-delete, unlock, complete, renew) on the
management port: api.py routes and answers, properties.py maps messages to HTTP, heads.py parks long
polls on the reactor. No semantics here: every operation is the engine call the AMQP door makes."""
